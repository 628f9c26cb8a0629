package refsyncer_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/synchook/synchook/internal/refsyncer"
)

func TestHostName(t *testing.T) {
	cases := []struct {
		name, namespace, want string
	}{
		{"web", "team-a", "web-x-team-a-x-vc1"},
		{strings.Repeat("n", 40), strings.Repeat("s", 30), strings.Repeat("n", 40) + "-x-" + strings.Repeat("s", 9) + "-"},
	}
	for _, tc := range cases {
		got := refsyncer.HostName(tc.name, tc.namespace, "vc1")
		if !strings.HasPrefix(got, tc.want) || len(got) > 63 {
			t.Errorf("HostName(%s, %s) = %q (%d), want prefix %q and at most 63 characters", tc.name, tc.namespace, got, len(got), tc.want)
		}
	}
	if a, b := refsyncer.HostName(strings.Repeat("a", 70), "x", "vc1"), refsyncer.HostName(strings.Repeat("a", 70)+"b", "x", "vc1"); a == b {
		t.Errorf("long names that differ after 52 characters map to the same host name %q", a)
	}
}

func TestSyncOnceFollowsTheVirtualCluster(t *testing.T) {
	ctx := t.Context()
	virtual := fake.NewClientBuilder().WithStatusSubresource(&corev1.Pod{}).Build()
	host := fake.NewClientBuilder().WithStatusSubresource(&corev1.Pod{}).Build()
	s, err := refsyncer.New(refsyncer.Options{Name: "vc1", HostNamespace: "host", Virtual: virtual, Host: host})
	if err != nil {
		t.Fatal(err)
	}
	sync := func(t *testing.T) {
		t.Helper()
		if err := s.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	get := func(t *testing.T, c client.Client, ns, name string, o client.Object) error {
		t.Helper()
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
	}
	for _, o := range []client.Object{
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "a", Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
		},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "a"},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "a"}, Data: map[string][]byte{"k": {0, 1}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: "a"}, Type: corev1.SecretTypeServiceAccountToken},
	} {
		if err := virtual.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	unmanaged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "host"}}
	if err := host.Create(ctx, unmanaged); err != nil {
		t.Fatal(err)
	}

	t.Run("virtual objects are created on the host with vcluster's bookkeeping", func(t *testing.T) {
		sync(t)
		pod := &corev1.Pod{}
		if err := get(t, host, "host", "web-x-a-x-vc1", pod); err != nil {
			t.Fatal(err)
		}
		if pod.Labels[refsyncer.MarkerLabel] != "vc1" || pod.Labels[refsyncer.NamespaceLabel] != "a" || pod.Labels["app"] != "web" ||
			pod.Annotations[refsyncer.NameAnnotation] != "web" || pod.Annotations[refsyncer.NamespaceAnnotation] != "a" ||
			pod.Annotations[refsyncer.HostNameAnnotation] != "web-x-a-x-vc1" {
			t.Errorf("host pod metadata %v %v", pod.Labels, pod.Annotations)
		}
		svc := &corev1.Service{}
		if err := get(t, host, "host", "api-x-a-x-vc1", svc); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(svc.Spec.Selector) != "map[app:web vcluster.loft.sh/namespace:a]" {
			t.Errorf("host selector %v", svc.Spec.Selector)
		}
		secret := &corev1.Secret{}
		if err := get(t, host, "host", "creds-x-a-x-vc1", secret); err != nil || string(secret.Data["k"]) != "\x00\x01" {
			t.Errorf("host secret %v, %v", secret.Data, err)
		}
		for _, name := range []string{"kubernetes-x-default-x-vc1", "token-x-a-x-vc1"} {
			if err := get(t, host, "host", name, &corev1.Service{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s was synced: %v", name, err)
			}
		}
	})

	t.Run("a pass with nothing to do writes nothing", func(t *testing.T) {
		before := s.Count("update Pod") + s.Count("update Service") + s.Count("update Secret") + s.Count("create Pod")
		sync(t)
		if after := s.Count("update Pod") + s.Count("update Service") + s.Count("update Secret") + s.Count("create Pod"); after != before {
			t.Errorf("%d writes in a pass with nothing to do", after-before)
		}
	})

	t.Run("updates follow and pod status comes up", func(t *testing.T) {
		vpod := &corev1.Pod{}
		if err := get(t, virtual, "a", "web", vpod); err != nil {
			t.Fatal(err)
		}
		vpod.Labels["tier"] = "1"
		vpod.Spec.Containers[0].Image = "nginx:2"
		if err := virtual.Update(ctx, vpod); err != nil {
			t.Fatal(err)
		}
		hpod := &corev1.Pod{}
		if err := get(t, host, "host", "web-x-a-x-vc1", hpod); err != nil {
			t.Fatal(err)
		}
		hpod.Status.Phase = corev1.PodRunning
		if err := host.Status().Update(ctx, hpod); err != nil {
			t.Fatal(err)
		}
		sync(t)
		if err := get(t, host, "host", "web-x-a-x-vc1", hpod); err != nil || hpod.Labels["tier"] != "1" || hpod.Spec.Containers[0].Image != "nginx:2" {
			t.Errorf("host pod labels %v image %s, %v", hpod.Labels, hpod.Spec.Containers[0].Image, err)
		}
		if err := get(t, virtual, "a", "web", vpod); err != nil || vpod.Status.Phase != corev1.PodRunning {
			t.Errorf("virtual pod phase %q, %v", vpod.Status.Phase, err)
		}
	})

	t.Run("deletes follow and unmanaged host objects are left alone", func(t *testing.T) {
		if err := virtual.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "a"}}); err != nil {
			t.Fatal(err)
		}
		sync(t)
		if err := get(t, host, "host", "web-x-a-x-vc1", &corev1.Pod{}); !apierrors.IsNotFound(err) {
			t.Errorf("host pod after the virtual delete: %v", err)
		}
		if err := get(t, host, "host", "other", &corev1.Pod{}); err != nil {
			t.Errorf("unmanaged host pod: %v", err)
		}
	})
}
