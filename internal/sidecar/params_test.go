package sidecar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/config"
	_ "github.com/synchook/synchook/config/policy" // policy hooks, as the synchook binary links them
	"github.com/synchook/synchook/internal/bridgev2/pluginv2"
	"github.com/synchook/synchook/internal/policyreg"
	"github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/patch"
)

// hostParamsConfig is a policy whose every param used sets the annotation
// param-<namespace>.<name> to its data.v (idempotent: the same params give the same object), bound
// three times: by name with the request's namespace (the vcluster's host namespace, for a host
// pod) as the default, by selector in the vcluster's host namespace, and by selector in the
// platform's namespace. hostParams names both namespaces: the vcluster's is listed by mistake.
const hostParamsConfig = `
hooks:
  - name: params
    types: [CreatePhysical]
    policy:
      apiVersion: admissionregistration.k8s.io/v1
      kind: MutatingAdmissionPolicy
      metadata: {name: params}
      spec:
        failurePolicy: Fail
        paramKind: {apiVersion: v1, kind: ConfigMap}
        matchConstraints:
          resourceRules:
            - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
        mutations:
          - patchType: ApplyConfiguration
            applyConfiguration:
              expression: >-
                Object{metadata: Object.metadata{annotations: {
                "param-" + params.metadata.namespace + "." + params.metadata.name: params.data["v"]}}}
    bindings:
      - apiVersion: admissionregistration.k8s.io/v1
        kind: MutatingAdmissionPolicyBinding
        metadata: {name: request-namespace}
        spec: {policyName: params, paramRef: {name: tolerations, parameterNotFoundAction: Allow}}
      - apiVersion: admissionregistration.k8s.io/v1
        kind: MutatingAdmissionPolicyBinding
        metadata: {name: vcluster-namespace}
        spec: {policyName: params, paramRef: {namespace: vcluster-a, selector: {matchLabels: {team: a}}, parameterNotFoundAction: Allow}}
      - apiVersion: admissionregistration.k8s.io/v1
        kind: MutatingAdmissionPolicyBinding
        metadata: {name: platform}
        spec: {policyName: params, paramRef: {namespace: platform, selector: {matchLabels: {team: a}}, parameterNotFoundAction: Deny}}
    hostParams:
      namespaces: [platform, vcluster-a]
`

// hostPod is a tenant pod as vcluster writes it into its host namespace vcluster-a.
const hostPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-x-default-x-tenant-a","namespace":"vcluster-a",` +
	`"labels":{"team":"a","vcluster.loft.sh/managed-by":"tenant-a"},` +
	`"annotations":{"vcluster.loft.sh/object-name":"web","vcluster.loft.sh/object-namespace":"default"}},` +
	`"spec":{"containers":[{"name":"c","image":"nginx"}]}}`

// hostParamsCluster is the host cluster of the test: the platform's param ConfigMap
// platform/tolerations, and the tenant's attack: ConfigMaps the tenant created in its virtual
// cluster, as vcluster syncs them into the host (its markers, the tenant's labels, the name the
// paramRef names), in the vcluster's host namespace and, as a multi-namespace vcluster would,
// in the platform's.
func hostParamsCluster(t *testing.T) (*rest.Config, client.Client) {
	t.Helper()
	env := testenv.Start(t)
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"platform", "vcluster-a"} {
		if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	synced := func(namespace, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: namespace, Name: name,
				Labels: map[string]string{"team": "a", "vcluster.loft.sh/managed-by": "tenant-a", "vcluster.loft.sh/namespace": "default"},
				Annotations: map[string]string{
					"vcluster.loft.sh/object-name": "tolerations", "vcluster.loft.sh/object-namespace": "default",
					"vcluster.loft.sh/object-uid": "5f0c1d2e-0000-4000-8000-000000000001",
				},
			},
			Data: map[string]string{"v": "TENANT"},
		}
	}
	for _, o := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "tolerations", Labels: map[string]string{"team": "a"}}, Data: map[string]string{"v": "start"}},
		synced("vcluster-a", "tolerations"),
		synced("platform", "tolerations-x-default-x-tenant-a"),
		// Without vcluster's markers but in its host namespace: a tenant cannot write one, and
		// synchook does not read that namespace anyway.
		{ObjectMeta: metav1.ObjectMeta{Namespace: "vcluster-a", Name: "unmarked", Labels: map[string]string{"team": "a"}}, Data: map[string]string{"v": "TENANT"}},
	} {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	return env.Config, c
}

// paramAnnotations returns the param-* annotations of the pod JSON obj.
func paramAnnotations(t *testing.T, obj []byte) map[string]string {
	t.Helper()
	var pod corev1.Pod
	if err := json.Unmarshal(obj, &pod); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, "param-") {
			out[k] = v
		}
	}
	return out
}

// checkHostParams drives one transport (mutate: a hook type and an object JSON to the result
// JSON) through the param's life: a write uses the platform's param and nothing of the
// tenant's, a change of the param in the host changes the next write (no restart), and the read
// of the object written with the old value gives back the tenant's object.
func checkHostParams(t *testing.T, c client.Client, mutate func(hookType string, obj []byte) ([]byte, error)) {
	t.Helper()
	setParam := func(v string) {
		t.Helper()
		var cm corev1.ConfigMap
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: "platform", Name: "tolerations"}, &cm); err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = v
		if err := c.Update(t.Context(), &cm); err != nil {
			t.Fatal(err)
		}
	}
	written := func(v string) []byte {
		t.Helper()
		var obj []byte
		testenv.Eventually(t, time.Minute, "a write with the param's value "+v, func() error {
			out, err := mutate("CreatePhysical", []byte(hostPod))
			if err != nil {
				return err
			}
			got := paramAnnotations(t, out)
			if strings.Contains(fmt.Sprint(got), "TENANT") {
				t.Fatalf("the write used a tenant's ConfigMap: %v", got)
			}
			if want := map[string]string{"param-platform.tolerations": v}; !maps.Equal(got, want) {
				return fmt.Errorf("params used %v, want %v", got, want)
			}
			obj = out
			return nil
		})
		return obj
	}
	id := strings.ReplaceAll(t.Name(), "/", "-")
	setParam(id + "-1")
	first := written(id + "-1")
	setParam(id + "-2")
	written(id + "-2")

	view, err := mutate("GetPhysical", first)
	if err != nil {
		t.Fatal(err)
	}
	var got, want corev1.Pod
	if err := json.Unmarshal(view, &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(hostPod), &want)
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("the read of the object written with the old param is not the tenant's:\n got %s\nwant %s", view, hostPod)
	}
}

// TestPolicyParamsComeFromTheHostClusterNeverFromTheTenant runs serve (admission, in a cluster:
// its client config and its namespace) and the vcluster plugin v2 (the host kubeconfig and
// namespace of Initialize) on one host apiserver; both build their params the same way
// (paramsource.Host, through BuildRegistry's HostParams).
func TestPolicyParamsComeFromTheHostClusterNeverFromTheTenant(t *testing.T) {
	rc, c := hostParamsCluster(t)

	t.Run("serve in the vcluster's pod reads the platform's param and never the tenant's", func(t *testing.T) {
		certDir := filepath.Join(t.TempDir(), "certs")
		opts := localOpts(t, certDir)
		opts.ConfigFile = writeFile(t, "config.yaml", hostParamsConfig)
		opts.UndoKeyFile = keyFile(t)
		opts.ServiceAccountNamespaceFile = writeFile(t, "namespace", "vcluster-a\n")
		opts.RESTConfig = func() (*rest.Config, error) { return rest.CopyConfig(rc), nil }
		s := startServe(t, opts)
		hc := s.waitReady(t)
		checkHostParams(t, c, func(hookType string, obj []byte) ([]byte, error) {
			return admit(hc, opts.Webhook.BindAddress, hookType, obj)
		})
	})

	t.Run("the vcluster plugin v2 reads the platform's param and never the tenant's", func(t *testing.T) {
		p := startPluginV2(t, map[string]string{"PLUGIN_CONFIG": hostParamsConfig, sidecar.UndoKeyFileEnvVar: keyFile(t)})
		pc, _ := p.dispense(t)
		init, err := json.Marshal(map[string]any{"workloadConfig": kubeconfigOf(t, rc), "currentNamespace": "vcluster-a"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pc.Initialize(t.Context(), &pluginv2.Initialize_Request{Config: string(init)}); err != nil {
			t.Fatal(err)
		}
		checkHostParams(t, c, func(hookType string, obj []byte) ([]byte, error) {
			res, err := pc.Mutate(t.Context(), &pluginv2.Mutate_Request{ApiVersion: "v1", Kind: "Pod", Type: hookType, Object: string(obj)})
			if err != nil {
				return nil, err
			}
			if !res.GetMutated() {
				return obj, nil
			}
			return []byte(res.GetObject()), nil
		})
	})
}

// admit sends obj to serve's hookType endpoint and returns it with the answer's patch applied,
// or the refusal as an error.
func admit(hc *http.Client, addr, hookType string, obj []byte) ([]byte, error) {
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "u1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "vcluster-a", Name: "web-x-default-x-tenant-a",
			Operation: admissionv1.Create,
		},
	}
	review.Request.Object.Raw = obj
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/mutate/"+hookType, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		return nil, fmt.Errorf("%s: HTTP %d, decode: %w", hookType, resp.StatusCode, err)
	}
	if !out.Response.Allowed {
		msg := ""
		if out.Response.Result != nil {
			msg = out.Response.Result.Message
		}
		return nil, errors.New(hookType + " refused: " + msg)
	}
	if len(out.Response.Patch) == 0 {
		return obj, nil
	}
	return patch.Apply(obj, out.Response.Patch)
}

// kubeconfigOf is a kubeconfig of the cluster of cfg (envtest's: client certificates).
func kubeconfigOf(t *testing.T, cfg *rest.Config) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["host"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["host"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["host"] = &clientcmdapi.Context{Cluster: "host", AuthInfo: "host"}
	kc.CurrentContext = "host"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// askedSource is a policyreg.HostParams whose sources count every question.
type askedSource struct{ asked atomic.Int32 }

func (a *askedSource) In([]string) policyreg.ParamSource { return a }

func (a *askedSource) Namespaced(context.Context, schema.GroupVersionKind) (bool, error) {
	a.asked.Add(1)
	return true, nil
}

func (a *askedSource) Get(context.Context, schema.GroupVersionKind, string, string) (*unstructured.Unstructured, error) {
	a.asked.Add(1)
	return nil, nil
}

func (a *askedSource) List(context.Context, schema.GroupVersionKind, string, labels.Selector) ([]*unstructured.Unstructured, error) {
	a.asked.Add(1)
	return nil, nil
}

// TestTheLoadTimeSelfTestRunsWithTheConfigsParamsOnly: the idempotency check that every start
// runs never asks the host for params (a host param is not known at start); a request does.
func TestTheLoadTimeSelfTestRunsWithTheConfigsParamsOnly(t *testing.T) {
	cfg, err := config.Parse([]byte(hostParamsConfig))
	if err != nil {
		t.Fatal(err)
	}
	src := &askedSource{}
	reg, err := sidecar.RegistryOf(t.Context(), cfg, sidecar.RegistryConfig{HostParams: src})
	if err != nil {
		t.Fatal(err)
	}
	if n := src.asked.Load(); n != 0 {
		t.Errorf("the self-test asked the host %d times", n)
	}
	if _, err := reg.Mutate(t.Context(), corev1.SchemeGroupVersion.WithKind("Pod"), "CreatePhysical", []byte(hostPod)); err == nil || src.asked.Load() == 0 {
		t.Errorf("a request: %v, the host asked %d times; want it asked (and Deny finding none)", err, src.asked.Load())
	}
}
