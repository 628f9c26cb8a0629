package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hookclient"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/refsyncer"
	"github.com/synchook/synchook/internal/testenv"
)

// syncConfig are the config hooks of the sync tests; the test sidecar adds the Go hook
// host-metrics-port (services). Write hooks that add something on the host come with a
// GetPhysical hook that hides it again, so the syncer's diff does not see it.
const syncConfig = `
hooks:
  - name: tenant-labels
    resources: [{apiVersion: v1, kind: Pod}, {apiVersion: v1, kind: Secret}]
    types: [CreatePhysical, UpdatePhysical]
    labels:
      labels: {vcluster.example.com/tenant: team-a}
  - name: bulk-host-only-label
    resources: [{apiVersion: v1, kind: Pod}]
    types: [GetPhysical]
    namespaces: [bulk]
    strip:
      paths: ["/metadata/labels/bulk.example.com~1host-only"]
  - name: host-ips-stay-on-the-host
    resources: [{apiVersion: v1, kind: Pod}]
    types: [GetPhysical, UpdateVirtual]
    strip:
      paths: ["/status/hostIP", "/status/hostIPs"]
`

const (
	vclusterName = "vc1"
	hostNS       = "vc1-host"
	virtualNS    = "team-a"
	tenantLabel  = "vcluster.example.com/tenant"
	// bulkHostOnlyLabel is on the host pods the List test creates directly, and stripped on
	// reads in namespace bulk only.
	bulkHostOnlyLabel = "bulk.example.com/host-only"
	// The port and label of the test sidecar's Go hook (e2e/testsidecar).
	hostMetricsPort = "host-metrics"
	readHookLabel   = "e2e.synchook.io/read-hook"
)

func TestSyncThroughTheSidecar(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two kube-apiservers and the sidecar process")
	}
	ctx := t.Context()
	dir := t.TempDir()

	built := make(chan error, 1)
	var bin string
	go func() {
		var err error
		bin, err = buildSyncSidecar(ctx, dir)
		built <- err
	}()
	vcfg, hcfg := startSyncClusters(t)
	if err := <-built; err != nil {
		t.Fatal(err)
	}
	sc := &syncSidecar{
		owner: t, bin: bin, addr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), metricsAddr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
		certDir: filepath.Join(dir, "certs"), config: writeSyncFile(t, dir, "config.yaml", syncConfig),
	}
	sc.start(t)

	// The tenant and the host operator use plain clients; the syncer uses only hooked ones.
	vplain, hplain := newClient(t, vcfg), newClient(t, hcfg)
	var clientLogs testenv.LogSink
	hc, err := hookclient.New(hookclient.Options{
		URL: "https://" + sc.addr, CAFile: filepath.Join(sc.certDir, "ca.crt"), Log: clientLogs.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	if err := hc.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	vhooked := hookclient.Wrap(vplain, hc, hookclient.Virtual)
	hhooked := hookclient.Wrap(hplain, hc, hookclient.Physical)

	for _, c := range []struct {
		c  client.Client
		ns string
	}{{vplain, virtualNS}, {hplain, hostNS}} {
		if err := c.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns}}); err != nil {
			t.Fatal(err)
		}
	}
	leaks := watchForHostIPs(t, vcfg)

	var syncerLogs testenv.LogSink
	syncer, err := refsyncer.New(refsyncer.Options{
		Name: vclusterName, HostNamespace: hostNS, Virtual: vhooked, Host: hhooked,
		Interval: 100 * time.Millisecond, Log: syncerLogs.Logger(), LabelsUp: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	syncCtx, stopSyncer := context.WithCancel(ctx)
	syncerDone := make(chan struct{})
	go func() {
		defer close(syncerDone)
		_ = syncer.Run(syncCtx)
	}()
	defer func() {
		stopSyncer()
		<-syncerDone
		if t.Failed() {
			t.Logf("syncer log:\n%s\nclient log:\n%s", syncerLogs.String(), clientLogs.String())
		}
	}()

	hostPod := refsyncer.HostName("web", virtualNS, vclusterName)

	t.Run("a pod created in the virtual cluster appears on the host with the hook's labels", func(t *testing.T) {
		vpod := syncPod("web", map[string]string{"app": "web"})
		vpod.Annotations = map[string]string{"note": "hello"}
		if err := vplain.Create(ctx, vpod); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Pod{}
		waitUntil(t, time.Minute, "host pod "+hostPod, func() (bool, error) {
			err := hplain.Get(ctx, client.ObjectKey{Namespace: hostNS, Name: hostPod}, got)
			return err == nil, err
		})
		wantLabels := map[string]string{
			"app": "web", tenantLabel: "team-a",
			refsyncer.MarkerLabel: vclusterName, refsyncer.NamespaceLabel: virtualNS,
		}
		if fmt.Sprint(got.Labels) != fmt.Sprint(wantLabels) {
			t.Errorf("host labels %v, want %v", got.Labels, wantLabels)
		}
		for k, want := range map[string]string{
			"note": "hello", refsyncer.NameAnnotation: "web", refsyncer.NamespaceAnnotation: virtualNS,
			refsyncer.UIDAnnotation: string(vpod.UID), refsyncer.KindAnnotation: "/v1, Kind=Pod",
		} {
			if got.Annotations[k] != want {
				t.Errorf("host annotation %s = %q, want %q", k, got.Annotations[k], want)
			}
		}
	})

	t.Run("an update in the virtual cluster keeps the hook's labels on the host", func(t *testing.T) {
		updates := sc.requests("UpdatePhysical", "Pod", hostPod)
		vpod := &corev1.Pod{}
		if err := vplain.Get(ctx, client.ObjectKey{Namespace: virtualNS, Name: "web"}, vpod); err != nil {
			t.Fatal(err)
		}
		vpod.Labels["tier"] = "frontend"
		vpod.Spec.Containers[0].Image = "nginx:1.27"
		if err := vplain.Update(ctx, vpod); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Pod{}
		waitUntil(t, time.Minute, "host pod update", func() (bool, error) {
			err := hplain.Get(ctx, client.ObjectKey{Namespace: hostNS, Name: hostPod}, got)
			return err == nil && got.Labels["tier"] == "frontend" && got.Spec.Containers[0].Image == "nginx:1.27", err
		})
		if got.Labels[tenantLabel] != "team-a" {
			t.Errorf("host labels after the update: %v, want %s kept", got.Labels, tenantLabel)
		}
		waitUntil(t, time.Minute, "an UpdatePhysical request for the pod", func() (bool, error) {
			return sc.requests("UpdatePhysical", "Pod", hostPod) > updates, nil
		})
	})

	t.Run("pod status comes back up without the host-only fields", func(t *testing.T) {
		// Play kubelet on the host.
		hpod := &corev1.Pod{}
		if err := hplain.Get(ctx, client.ObjectKey{Namespace: hostNS, Name: hostPod}, hpod); err != nil {
			t.Fatal(err)
		}
		hpod.Status.Phase = corev1.PodRunning
		hpod.Status.PodIP, hpod.Status.PodIPs = "10.1.0.5", []corev1.PodIP{{IP: "10.1.0.5"}}
		hpod.Status.HostIP, hpod.Status.HostIPs = "192.168.7.7", []corev1.HostIP{{IP: "192.168.7.7"}}
		hpod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		if err := hplain.Status().Update(ctx, hpod); err != nil {
			t.Fatal(err)
		}
		vpod := &corev1.Pod{}
		waitUntil(t, time.Minute, "virtual pod status", func() (bool, error) {
			err := vplain.Get(ctx, client.ObjectKey{Namespace: virtualNS, Name: "web"}, vpod)
			return err == nil && vpod.Status.Phase == corev1.PodRunning && vpod.Status.PodIP == "10.1.0.5", err
		})
		if vpod.Status.HostIP != "" || len(vpod.Status.HostIPs) != 0 || len(vpod.Status.Conditions) != 1 {
			t.Errorf("virtual pod status %+v, want the host's without hostIP and hostIPs", vpod.Status)
		}
	})

	t.Run("with labels synced both ways and no Get hook, the tenant never sees the hook's label and the syncer goes quiet", func(t *testing.T) {
		// A label a host controller puts on the host pod comes up (the syncer does sync labels
		// up); the hook's label never does, because the automatic undo takes it off on reads.
		hpod := &corev1.Pod{}
		if err := hplain.Get(ctx, client.ObjectKey{Namespace: hostNS, Name: hostPod}, hpod); err != nil {
			t.Fatal(err)
		}
		hpod.Labels["host.example.com/zone"] = "z1"
		if err := hplain.Update(ctx, hpod); err != nil {
			t.Fatal(err)
		}
		vpod := &corev1.Pod{}
		waitUntil(t, time.Minute, "the host's own label on the virtual pod", func() (bool, error) {
			err := vplain.Get(ctx, client.ObjectKey{Namespace: virtualNS, Name: "web"}, vpod)
			return err == nil && vpod.Labels["host.example.com/zone"] == "z1", err
		})
		waitPasses(t, syncer, 2) // a whole pass after the label came up: the syncer has settled
		// The quiet period: 2 s and at least 10 syncer passes (about 20 at its 100 ms interval
		// on an idle machine), so that a loaded machine, where passes take longer, still
		// watches as many passes as the claim needs.
		const quiet, quietPasses = 2 * time.Second, 10
		end := make(chan struct{})
		changes := watchResourceVersions(t, hcfg, &corev1.PodList{}, end)
		updates := sc.requests("UpdatePhysical", "Pod", hostPod)
		quietWindow(t, syncer, quiet, quietPasses)
		close(end)
		rv := <-changes
		if n := sc.requests("UpdatePhysical", "Pod", hostPod) - updates; n != 0 || rv[hostPod] != 0 {
			t.Errorf("the host pod got %d UpdatePhysical requests and %d resourceVersion changes in a quiet period, want 0", n, rv[hostPod])
		}
		if err := vplain.Get(ctx, client.ObjectKey{Namespace: virtualNS, Name: "web"}, vpod); err != nil {
			t.Fatal(err)
		}
		if _, leaked := vpod.Labels[tenantLabel]; leaked {
			t.Errorf("the tenant's pod shows the hook's label: %v", vpod.Labels)
		}
		if _, leaked := vpod.Annotations["synchook.io/undo"]; leaked {
			t.Errorf("the tenant's pod shows the undo annotation: %v", vpod.Annotations)
		}
		if hpod := (&corev1.Pod{}); hplain.Get(ctx, client.ObjectKey{Namespace: hostNS, Name: hostPod}, hpod) != nil || hpod.Labels[tenantLabel] != "team-a" {
			t.Errorf("the host pod lost the hook's label: %v", hpod.Labels)
		}
	})

	t.Run("a host-side service port hidden on reads does not make the syncer update again", func(t *testing.T) {
		ports := []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}
		for _, svc := range []*corev1.Service{
			{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: virtualNS}, Spec: corev1.ServiceSpec{Ports: ports, Selector: map[string]string{"app": "web"}}},
			// The control: its read hook is off, so the syncer sees the extra port.
			{ObjectMeta: metav1.ObjectMeta{Name: "api-control", Namespace: virtualNS, Labels: map[string]string{readHookLabel: "off"}}, Spec: corev1.ServiceSpec{Ports: ports}},
		} {
			if err := vplain.Create(ctx, svc); err != nil {
				t.Fatal(err)
			}
		}
		api, control := refsyncer.HostName("api", virtualNS, vclusterName), refsyncer.HostName("api-control", virtualNS, vclusterName)
		for _, name := range []string{api, control} {
			waitUntil(t, time.Minute, "host service "+name, func() (bool, error) {
				svc := &corev1.Service{}
				err := hplain.Get(ctx, client.ObjectKey{Namespace: hostNS, Name: name}, svc)
				return err == nil && len(svc.Spec.Ports) == 2 && svc.Spec.Ports[1].Name == hostMetricsPort, err
			})
		}
		waitPasses(t, syncer, 2) // a whole pass sees the services once more

		// The quiet period: 3 s and at least 10 syncer passes, each of which updates the control
		// service, so that its at least 5 update requests below do not depend on how many
		// passes a loaded machine fits in 3 s.
		const quiet, quietPasses = 3 * time.Second, 10
		end := make(chan struct{})
		changes := watchResourceVersions(t, hcfg, &corev1.ServiceList{}, end)
		before := map[string]int{api: sc.requests("UpdatePhysical", "Service", api), control: sc.requests("UpdatePhysical", "Service", control)}
		updatesBefore := syncer.Count("update Service")
		quietWindow(t, syncer, quiet, quietPasses)
		close(end)
		rv := <-changes
		requests := map[string]int{}
		for name, n := range before {
			requests[name] = sc.requests("UpdatePhysical", "Service", name) - n
		}
		t.Logf("over %s or more: UpdatePhysical requests %s=%d %s=%d; host resourceVersion changes %s=%d %s=%d; syncer service updates %d",
			quiet, api, requests[api], control, requests[control], api, rv[api], control, rv[control], syncer.Count("update Service")-updatesBefore)
		if requests[api] != 0 || rv[api] != 0 {
			t.Errorf("the hooked service was updated %d times (%d resourceVersion changes) in a quiet period, want 0", requests[api], rv[api])
		}
		if total := sc.settledRequests(t, "UpdatePhysical", "Service", api); total != 0 {
			t.Errorf("the hooked service got %d UpdatePhysical requests since it was created, want 0", total)
		}
		if requests[control] < 5 {
			t.Errorf("the control service got %d update requests, want the syncer to keep trying without the read hook", requests[control])
		}
	})

	secretData := map[string][]byte{"password": []byte(secretValue), "binary": {0, 1, 2, 0xfe, 0xff}, "empty": {}}
	hostSecret := refsyncer.HostName("creds", virtualNS, vclusterName)

	t.Run("secrets pass through byte-identical in data", func(t *testing.T) {
		if err := vplain.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: virtualNS}, Data: secretData}); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Secret{}
		waitUntil(t, time.Minute, "host secret", func() (bool, error) {
			err := hplain.Get(ctx, client.ObjectKey{Namespace: hostNS, Name: hostSecret}, got)
			return err == nil, err
		})
		if got.Labels[tenantLabel] != "team-a" {
			t.Errorf("host secret labels %v, want the hook's label", got.Labels)
		}
		assertSameData(t, got.Data, secretData)

		vs := &corev1.Secret{}
		if err := vplain.Get(ctx, client.ObjectKey{Namespace: virtualNS, Name: "creds"}, vs); err != nil {
			t.Fatal(err)
		}
		vs.Data["rotated"] = []byte{0xff, 0xfe, '"', '\\', 0}
		if err := vplain.Update(ctx, vs); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, time.Minute, "host secret update", func() (bool, error) {
			err := hplain.Get(ctx, client.ObjectKey{Namespace: hostNS, Name: hostSecret}, got)
			return err == nil && len(got.Data) == 4, err
		})
		assertSameData(t, got.Data, vs.Data)
		logs := sc.logs.String() + syncerLogs.String() + clientLogs.String()
		for _, leak := range []string{"s3cr3t", base64.StdEncoding.EncodeToString([]byte(secretValue))[:12]} {
			if strings.Contains(logs, leak) {
				t.Errorf("secret data %q appears in the logs", leak)
			}
		}
	})

	t.Run("deleting in the virtual cluster deletes on the host", func(t *testing.T) {
		for _, o := range []client.Object{
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: virtualNS}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: virtualNS}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: virtualNS}},
		} {
			if err := vplain.Delete(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range []client.Object{
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: hostPod}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: refsyncer.HostName("api", virtualNS, vclusterName)}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: hostSecret}},
		} {
			waitUntil(t, time.Minute, "host "+o.GetName()+" deleted", func() (bool, error) {
				err := hplain.Get(ctx, client.ObjectKey{Namespace: hostNS, Name: o.GetName()}, o)
				return apierrors.IsNotFound(err), err
			})
		}
	})

	t.Run("with the sidecar stopped nothing unmutated is written and after a restart the hooks apply", func(t *testing.T) {
		name := refsyncer.HostName("late", virtualNS, vclusterName)
		first := watchFirstAdded(t, hcfg, name)
		sc.stop(t)
		errorsBefore := syncer.Count("errors")
		if err := vplain.Create(ctx, syncPod("late", map[string]string{"app": "late"})); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, time.Minute, "the syncer to fail and retry", func() (bool, error) {
			return syncer.Count("errors")-errorsBefore >= 3 && strings.Contains(fmt.Sprint(syncer.LastError()), "create Pod "+name), nil
		})
		lastErr := syncer.LastError()
		if !errors.Is(lastErr, hookclient.ErrUnavailable) || !strings.Contains(lastErr.Error(), "CreatePhysical v1 Pod "+hostNS+"/"+name+": sidecar unavailable") {
			t.Errorf("syncer error = %v, want a CreatePhysical ErrUnavailable naming the pod", lastErr)
		}
		if err := hplain.Get(ctx, client.ObjectKey{Namespace: hostNS, Name: name}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
			t.Fatalf("host pod while the sidecar is down: %v, want NotFound", err)
		}
		t.Logf("%d failed syncer operations while the sidecar was down", syncer.Count("errors")-errorsBefore)

		sc.start(t)
		got := &corev1.Pod{}
		waitUntil(t, time.Minute, "host pod after the restart", func() (bool, error) {
			err := hplain.Get(ctx, client.ObjectKey{Namespace: hostNS, Name: name}, got)
			return err == nil, err
		})
		if got.Labels[tenantLabel] != "team-a" {
			t.Errorf("host pod labels %v, want the hook's label", got.Labels)
		}
		select {
		case labels := <-first:
			if labels[tenantLabel] != "team-a" {
				t.Errorf("the first version written to the host had labels %v, want the hook's label", labels)
			}
		case <-time.After(time.Minute): // a guard against a hang: the pod exists, its event is due
			t.Error("no ADDED event for the host pod")
		}
	})

	stopSyncer()
	<-syncerDone

	t.Run("a List of 1,000 pods with a Get hook is one request", func(t *testing.T) {
		const n = 1000
		if err := hplain.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bulk"}}); err != nil {
			t.Fatal(err)
		}
		createPods(t, hplain, "bulk", n)

		plain := &corev1.PodList{}
		start := time.Now()
		if err := hplain.List(ctx, plain, client.InNamespace("bulk")); err != nil {
			t.Fatal(err)
		}
		plainTime := time.Since(start)
		listJSON, err := json.Marshal(plain)
		if err != nil {
			t.Fatal(err)
		}

		before := sc.settledRequests(t, "GetPhysical", "PodList", "")
		list := &corev1.PodList{}
		start = time.Now()
		if err := hhooked.List(ctx, list, client.InNamespace("bulk")); err != nil {
			t.Fatal(err)
		}
		hookedTime := time.Since(start)
		requests := sc.settledRequests(t, "GetPhysical", "PodList", "") - before
		inSidecar := sc.logs.lastField("duration", `"hookType":"GetPhysical"`, `"gvk":"/v1, Kind=PodList"`)
		if requests != 1 {
			t.Errorf("%d GetPhysical PodList requests for one List, want 1", requests)
		}
		if len(list.Items) != n {
			t.Fatalf("listed %d pods, want %d", len(list.Items), n)
		}
		for _, p := range list.Items {
			if _, ok := p.Labels[bulkHostOnlyLabel]; ok || p.Labels["app"] != "bulk" {
				t.Fatalf("pod %s labels %v, want %s hidden by GetPhysical", p.Name, p.Labels, bulkHostOnlyLabel)
			}
		}

		// For comparison: the same pods in one request each, and one pod through the sidecar,
		// with a Get and with a CreatePhysical.
		singles := sc.settledRequests(t, "GetPhysical", "Pod", "")
		start = time.Now()
		for i := range plain.Items {
			if err := hc.Mutate(ctx, hooks.GetPhysical, &plain.Items[i]); err != nil {
				t.Fatal(err)
			}
		}
		singleTime := time.Since(start)
		singles = sc.settledRequests(t, "GetPhysical", "Pod", "") - singles
		const rounds = 50
		one := &corev1.Pod{}
		start = time.Now()
		for range rounds {
			if err := hhooked.Get(ctx, client.ObjectKey{Namespace: "bulk", Name: "bulk-0000"}, one); err != nil {
				t.Fatal(err)
			}
		}
		getTime := time.Since(start) / rounds
		start = time.Now()
		for range rounds {
			if err := hc.Mutate(ctx, hooks.CreatePhysical, syncPod("single", nil)); err != nil {
				t.Fatal(err)
			}
		}
		mutateTime := time.Since(start) / rounds
		t.Logf("List of %d pods (%d KiB of JSON): plain %s, hooked %s in %d sidecar request(s) (+%s; the sidecar's own time %s); "+
			"the same pods one request each: %s in %d requests; one pod: hooked Get %s, CreatePhysical round trip %s",
			n, len(listJSON)>>10, plainTime.Round(time.Millisecond), hookedTime.Round(time.Millisecond), requests,
			(hookedTime - plainTime).Round(time.Millisecond), inSidecar, singleTime.Round(time.Millisecond), singles,
			getTime.Round(time.Microsecond), mutateTime.Round(time.Microsecond))
	})

	if n := sc.requests("GetVirtual", "", ""); n != 0 {
		t.Errorf("%d GetVirtual requests, want 0: no GetVirtual hooks are configured", n)
	}
	if leaked := leaks.Load(); leaked != 0 {
		t.Errorf("%d virtual pod events carried a hostIP", leaked)
	}
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func syncPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: virtualNS, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
}

func assertSameData(t *testing.T, got, want map[string][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("data has keys %d, want %d", len(got), len(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || !bytes.Equal(g, v) {
			t.Errorf("data[%s] = %x, want %x", k, g, v)
		}
	}
}

// createPods creates n pods named bulk-NNNN in namespace ns with 16 workers.
func createPods(t *testing.T, c client.Client, ns string, n int) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		errs = make(chan error, 16)
	)
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				p := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bulk-%04d", i), Namespace: ns, Labels: map[string]string{"app": "bulk", bulkHostOnlyLabel: "x"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
				}
				if err := c.Create(t.Context(), p); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// newWatchClient returns a client that can watch.
func newWatchClient(t *testing.T, cfg *rest.Config) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// watchForHostIPs watches the virtual cluster's pods until t ends and counts the events of
// pods that carry a hostIP.
func watchForHostIPs(t *testing.T, cfg *rest.Config) *atomic.Int64 {
	t.Helper()
	w, err := newWatchClient(t, cfg).Watch(t.Context(), &corev1.PodList{})
	if err != nil {
		t.Fatal(err)
	}
	var leaks atomic.Int64
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && (p.Status.HostIP != "" || len(p.Status.HostIPs) > 0) {
				leaks.Add(1)
			}
		}
	}()
	t.Cleanup(w.Stop)
	return &leaks
}

// watchResourceVersions counts MODIFIED events per object name in the host namespace until end
// is closed, then sends the counts.
func watchResourceVersions(t *testing.T, cfg *rest.Config, list client.ObjectList, end <-chan struct{}) <-chan map[string]int {
	t.Helper()
	c := newWatchClient(t, cfg)
	if err := c.List(t.Context(), list, client.InNamespace(hostNS)); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(t.Context(), list, client.InNamespace(hostNS), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan map[string]int, 1)
	go func() {
		defer w.Stop()
		counts := map[string]int{}
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					out <- counts
					return
				}
				if o, isObj := ev.Object.(client.Object); isObj && ev.Type == watch.Modified {
					counts[o.GetName()]++
				}
			case <-end:
				out <- counts
				return
			}
		}
	}()
	return out
}

// watchFirstAdded watches host pods and sends the labels of the first ADDED event of name.
func watchFirstAdded(t *testing.T, cfg *rest.Config, name string) <-chan map[string]string {
	t.Helper()
	w, err := newWatchClient(t, cfg).Watch(t.Context(), &corev1.PodList{}, client.InNamespace(hostNS))
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan map[string]string, 1)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added && p.Name == name {
				out <- p.Labels
				return
			}
		}
	}()
	t.Cleanup(w.Stop)
	return out
}
