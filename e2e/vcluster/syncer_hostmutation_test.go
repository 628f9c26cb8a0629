package vcluster

// A host that mutates (DESIGN.md, "What the host stores"): the host kube-apiserver has a
// MutatingAdmissionPolicy of its own that injects a sidecar, a volume, a label, an annotation
// and a toleration into every pod, rewrites a registry and adds a seccompProfile to the
// securityContext of a container named app. vcluster's syncer runs once without synchook
// (vcluster's own behaviour with that host: the baseline) and once with synchook (labels,
// strips of a map's only key and of every toleration, an image rewrite, a Secret strip, a
// policy hook on Services and one that makes the app container's securityContext). Both
// apiservers write an audit log of every write to pods, Secrets and Services, so that the
// syncer's write attempts (no-op and failed ones included) can be counted per object, which
// the apiservers' watch events alone cannot.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// What the host's own policy adds to every pod in the host namespace.
const (
	hostInjectedLabel     = "host.example/injected"
	hostSidecarAnnotation = "host.example/sidecar"
	hostSidecarName       = "log-shipper"
	hostSidecarImage      = "host-registry.example/log-shipper:2"
	hostVolumeName        = "host-logs"
	hostTolerationKey     = "host.example/pool"
	// the host's registry mirror: quay.io/X becomes hostMirror + X
	hostMirror = "quay-mirror.host.example/"
	// the tenant's second container, whose image the host rewrites
	toolsImage = "quay.io/org/tools:1"
	// the tenant's own toleration and its only nodeSelector key, which synchook strips
	tenantTolerationKey = "dedicated"
	tenantNodeSelector  = "disk"
	// the annotation synchook's policy hook puts on host Services
	lbAnnotation = "synchook.io/lb"
	// the container into whose securityContext the host adds a seccompProfile, and whose
	// securityContext synchook's app-non-root hook makes (the tenant's has none)
	appContainer = "app"
)

// hostMutationPolicy is the host's MutatingAdmissionPolicy, on pod CREATE and UPDATE. Every
// mutation is a no-op on a pod that already has it (an update of a pod may not add a
// container or a volume, nor change a container's securityContext): containers and volumes
// are list maps keyed by name, merged by ApplyConfiguration; tolerations are an atomic list,
// added to by JSONPatch when missing, and so is the app container's seccompProfile (into the
// securityContext it has, or in a new one). That one is a JSONPatch at the container's index
// so that the containers keep their order: an ApplyConfiguration that names app puts the
// host's sidecar before it, which moves it off the index synchook's undo of it records
// (the read then keeps every hook change inside that container: the app image's mirror too,
// and vcluster writes the tenant's image back at every sync).
const hostMutationPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: host-injector}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  variables:
    - name: toleration
      expression: '{"key": "host.example/pool", "operator": "Exists", "effect": "NoSchedule"}'
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: >-
          Object{
            metadata: Object.metadata{
              labels: {"host.example/injected": "true"},
              annotations: {"host.example/sidecar": "log-shipper"}
            },
            spec: Object.spec{
              containers: [Object.spec.containers{name: "log-shipper", image: "host-registry.example/log-shipper:2"}] +
                object.spec.containers.filter(c, has(c.image) && c.image.startsWith("quay.io/")).map(c,
                  Object.spec.containers{name: c.name, image: "quay-mirror.host.example/" + c.image.substring(8)}),
              volumes: [Object.spec.volumes{name: "host-logs", emptyDir: Object.spec.volumes.emptyDir{}}]
            }
          }
    - patchType: JSONPatch
      jsonPatch:
        expression: >-
          has(object.spec.tolerations) && object.spec.tolerations.exists(t, has(t.key) && t.key == "host.example/pool")
            ? []
            : has(object.spec.tolerations)
              ? [JSONPatch{op: "add", path: "/spec/tolerations/-", value: variables.toleration}]
              : [JSONPatch{op: "add", path: "/spec/tolerations", value: [variables.toleration]}]
    - patchType: JSONPatch
      jsonPatch:
        expression: >-
          object.spec.containers.map(c, c.name).indexOf("app") < 0 ||
            (has(object.spec.containers[object.spec.containers.map(c, c.name).indexOf("app")].securityContext) && has(object.spec.containers[object.spec.containers.map(c, c.name).indexOf("app")].securityContext.seccompProfile))
            ? []
            : has(object.spec.containers[object.spec.containers.map(c, c.name).indexOf("app")].securityContext)
              ? [JSONPatch{op: "add", path: "/spec/containers/" + string(object.spec.containers.map(c, c.name).indexOf("app")) + "/securityContext/seccompProfile", value: {"type": "RuntimeDefault"}}]
              : [JSONPatch{op: "add", path: "/spec/containers/" + string(object.spec.containers.map(c, c.name).indexOf("app")) + "/securityContext", value: {"seccompProfile": {"type": "RuntimeDefault"}}}]
`

// hostMutationHooks are synchook's hooks in the mutating-host test, after plugin.yaml's own
// (pod-labels: synchook.io/hooked on pods and services; strip-host-ip on GetPhysical) and
// imageHooks' mirror (docker.io to registry.internal/dockerhub) and secretStripHook.
// app-non-root makes a securityContext (runAsNonRoot) the tenant's app container does not
// have, into which the host's policy adds its seccompProfile: a parent the hooks created and
// the host added to, which the read gives back as the host's seccompProfile alone
// (undo.takeBack), what the host stores without synchook.
const hostMutationHooks = `
- name: strip-scheduling
  resources: [{apiVersion: v1, kind: Pod}]
  types: [CreatePhysical, UpdatePhysical]
  strip: {paths: [/spec/nodeSelector/disk, "/spec/tolerations/*"]}
- name: service-lb
  types: [CreatePhysical, UpdatePhysical]
  policy:
    apiVersion: admissionregistration.k8s.io/v1
    kind: MutatingAdmissionPolicy
    metadata: {name: service-lb}
    spec:
      reinvocationPolicy: Never
      failurePolicy: Fail
      matchConstraints:
        resourceRules:
          - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [services]}
      mutations:
        - patchType: ApplyConfiguration
          applyConfiguration:
            expression: 'Object{metadata: Object.metadata{annotations: {"synchook.io/lb": "internal"}}}'
- name: app-non-root
  types: [CreatePhysical, UpdatePhysical]
  policy:
    apiVersion: admissionregistration.k8s.io/v1
    kind: MutatingAdmissionPolicy
    metadata: {name: app-non-root}
    spec:
      reinvocationPolicy: Never
      failurePolicy: Fail
      matchConstraints:
        resourceRules:
          - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
      mutations:
        - patchType: ApplyConfiguration
          applyConfiguration:
            expression: >-
              Object{spec: Object.spec{containers: object.spec.containers.filter(c, c.name == "app").map(c,
                Object.spec.containers{name: c.name, securityContext: Object.spec.containers.securityContext{runAsNonRoot: true}})}}
`

func mutatingHostConfig(tb testing.TB) map[string]any {
	tb.Helper()
	hooks := slices.Concat(pluginYAMLHooks(tb), namedHooks(tb, imageHooks, "mirror"), yamlList(tb, secretStripHook), yamlList(tb, hostMutationHooks))
	return map[string]any{"hooks": hooks}
}

// The tenant's objects in the mutating-host test: two pods (web has a second container whose
// image the host rewrites, and vcluster writes the tenant's image back at every sync of it;
// api has none, so that nothing but synchook could make vcluster write it), the one-key
// Secret both use and a Service.
const (
	mhPod      = "web"
	mhCalmPod  = "api"
	mhSecret   = "creds"
	mhService  = "web"
	mhRevLabel = "rev"
)

// mhObject is one of the tenant's objects.
type mhObject struct{ kind, name string }

func (o mhObject) String() string { return o.kind + " " + o.name }

var mhObjects = []mhObject{{kindPod, mhPod}, {kindPod, mhCalmPod}, {kindSecret, mhSecret}, {kindService, mhService}}

// mutatingHostPod is tenantPod (env from the Secret) with one nodeSelector key and one
// toleration of the tenant's own; with tools, a second container whose image the host rewrites.
func mutatingHostPod(name string, tools bool) *corev1.Pod {
	p := tenantPod(name, mhSecret)
	if tools {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "tools", Image: toolsImage})
	}
	p.Spec.NodeSelector = map[string]string{tenantNodeSelector: "ssd"}
	p.Spec.Tolerations = []corev1.Toleration{{Key: tenantTolerationKey, Operator: corev1.TolerationOpEqual, Value: tenantNS, Effect: corev1.TaintEffectNoSchedule}}
	return p
}

// The tenant's update of each object (a label; a pod's app image too), and the same applied
// to the object by hand.
const (
	mhPodPatch   = `{"metadata":{"labels":{"rev":"1"}},"spec":{"containers":[{"name":"app","image":"nginx:1.28"}]}}`
	mhLabelPatch = `{"metadata":{"labels":{"rev":"1"}}}`
)

func afterTenantUpdate(o object) object {
	o = o.DeepCopyObject().(object)
	labels := maps.Clone(o.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	labels[mhRevLabel] = "1"
	o.SetLabels(labels)
	if p, ok := o.(*corev1.Pod); ok {
		p.Spec.Containers[0].Image = "nginx:1.28"
	}
	return o
}

// auditPolicy logs every write to pods, Secrets and Services (and their status) without
// bodies.
const auditPolicy = `
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete]
    resources: [{group: "", resources: [pods, pods/status, secrets, services, services/status]}]
  - level: None
`

// auditLogs are the audit log files of a cluster pair, by cluster name.
type auditLogs map[string]string

// startAuditedClusters is startClusters with an audit log of auditPolicy on both apiservers.
func startAuditedClusters(tb testing.TB) (*clusters, auditLogs) {
	tb.Helper()
	dir := tb.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		tb.Fatal(err)
	}
	logs := auditLogs{"host": filepath.Join(dir, "host-audit.log"), "virtual": filepath.Join(dir, "virtual-audit.log")}
	cl := startClustersWith(tb, func(name string, api *envtest.APIServer) {
		api.Configure().
			Set("audit-policy-file", policy).
			Set("audit-log-path", logs[name]).
			Set("audit-log-mode", "blocking")
	})
	return cl, logs
}

// auditWrite is one write an apiserver's audit log recorded.
type auditWrite struct {
	cluster, user, verb, resource, subresource, namespace, name string
	code                                                        int
	at                                                          time.Time
}

func (w auditWrite) String() string {
	res := w.resource
	if w.subresource != "" {
		res += "/" + w.subresource
	}
	return fmt.Sprintf("%s %s %s %s/%s by %s: %d", w.at.Format("15:04:05.000"), w.verb, res, w.namespace, w.name, w.user, w.code)
}

// key groups writes for counting: cluster, resource(/subresource), verb and code.
func (w auditWrite) key() string {
	res := w.resource
	if w.subresource != "" {
		res += "/" + w.subresource
	}
	return fmt.Sprintf("%s %s %s %d", w.cluster, res, w.verb, w.code)
}

// writes returns every completed write in the audit logs that keep takes.
func (a auditLogs) writes(tb testing.TB, keep func(auditWrite) bool) []auditWrite {
	tb.Helper()
	var out []auditWrite
	for _, name := range slices.Sorted(maps.Keys(a)) {
		raw, err := os.ReadFile(a[name])
		if err != nil {
			tb.Fatalf("the %s apiserver's audit log: %v", name, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var ev struct {
				Stage string `json:"stage"`
				Verb  string `json:"verb"`
				User  struct {
					Username string `json:"username"`
				} `json:"user"`
				ObjectRef *struct {
					Resource    string `json:"resource"`
					Subresource string `json:"subresource"`
					Namespace   string `json:"namespace"`
					Name        string `json:"name"`
				} `json:"objectRef"`
				ResponseStatus *struct {
					Code int `json:"code"`
				} `json:"responseStatus"`
				StageTimestamp metav1.MicroTime `json:"stageTimestamp"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				tb.Fatalf("the %s apiserver's audit log: %v", name, err)
			}
			if ev.Stage != "ResponseComplete" || ev.ObjectRef == nil {
				continue
			}
			w := auditWrite{
				cluster: name, user: ev.User.Username, verb: ev.Verb, resource: ev.ObjectRef.Resource, subresource: ev.ObjectRef.Subresource,
				namespace: ev.ObjectRef.Namespace, name: ev.ObjectRef.Name, at: ev.StageTimestamp.Time,
			}
			if ev.ResponseStatus != nil {
				w.code = ev.ResponseStatus.Code
			}
			if keep == nil || keep(w) {
				out = append(out, w)
			}
		}
		if err := sc.Err(); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// installHostPolicy creates hostMutationPolicy and its binding to the host namespace, and
// waits until the host apiserver applies it (a dry-run pod comes back mutated).
func installHostPolicy(tb testing.TB, cl *clusters) {
	tb.Helper()
	ctx := tb.Context()
	var p admissionregistrationv1.MutatingAdmissionPolicy
	if err := yaml.Unmarshal([]byte(hostMutationPolicy), &p); err != nil {
		tb.Fatal(err)
	}
	ar := cl.host.cs.AdmissionregistrationV1()
	for _, err := range []error{
		ignoreExists(cl.host.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostNamespace}}, metav1.CreateOptions{})),
		ignoreExists(ar.MutatingAdmissionPolicies().Create(ctx, &p, metav1.CreateOptions{})),
		ignoreExists(ar.MutatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
				PolicyName: p.Name,
				MatchResources: &admissionregistrationv1.MatchResources{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": hostNamespace}},
				},
			},
		}, metav1.CreateOptions{})),
	} {
		if err != nil {
			tb.Fatalf("the host's policy: %v", err)
		}
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "policy-probe", Namespace: hostNamespace},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "probe", Image: "quay.io/org/probe:1"}, {Name: appContainer, Image: "nginx:1.27"}},
		},
	}
	start := time.Now()
	waitFor(tb, time.Minute, "the host's MutatingAdmissionPolicy to take effect", func(ctx context.Context) (bool, string, error) {
		out, err := cl.host.cs.CoreV1().Pods(hostNamespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, "dry-run create: " + err.Error(), nil
		}
		if miss := hostChangesMissing(out); len(miss) > 0 {
			return false, fmt.Sprintf("the probe pod lacks %v", miss), nil
		}
		if got := containerImage(out, "probe"); got != hostMirror+"org/probe:1" {
			return false, "the probe's image is " + got, nil
		}
		return true, "", nil
	})
	tb.Logf("the host's MutatingAdmissionPolicy took effect after %s", time.Since(start).Round(time.Millisecond))
}

// hostChangesMissing returns what of the host policy's changes a pod lacks (its image rewrite
// aside).
func hostChangesMissing(p *corev1.Pod) []string {
	var miss []string
	if p.Labels[hostInjectedLabel] != "true" {
		miss = append(miss, "label "+hostInjectedLabel)
	}
	if p.Annotations[hostSidecarAnnotation] != hostSidecarName {
		miss = append(miss, "annotation "+hostSidecarAnnotation)
	}
	if !slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == hostSidecarName && c.Image == hostSidecarImage }) {
		miss = append(miss, "container "+hostSidecarName)
	}
	if !slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == hostVolumeName }) {
		miss = append(miss, "volume "+hostVolumeName)
	}
	if !slices.ContainsFunc(p.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == hostTolerationKey }) {
		miss = append(miss, "toleration "+hostTolerationKey)
	}
	if c := container(p, appContainer); c != nil && !hostSeccomp(c.SecurityContext) {
		miss = append(miss, "seccompProfile of container "+appContainer)
	}
	return miss
}

// hostSeccomp reports whether sc holds the host policy's seccompProfile.
func hostSeccomp(sc *corev1.SecurityContext) bool {
	return sc != nil && sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
}

// container returns a pod's container name (nil when there is none).
func container(p *corev1.Pod, name string) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			return &p.Spec.Containers[i]
		}
	}
	return nil
}

// containerImage returns the image of a pod's container name ("" when there is none).
func containerImage(p *corev1.Pod, name string) string {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// duplicateTolerations returns the tolerations a pod holds more than once.
func duplicateTolerations(p *corev1.Pod) []string {
	seen := map[string]int{}
	for _, t := range p.Spec.Tolerations {
		b, _ := json.Marshal(t)
		seen[string(b)]++
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(seen)) {
		if seen[k] > 1 {
			out = append(out, fmt.Sprintf("%dx %s", seen[k], k))
		}
	}
	return out
}

// foreignChanges returns what a version o of a tenant object shows that the tenant's own
// object ref (as the tenant's apiserver stored it, with its defaults) does not: labels and
// annotations with their values, the spec by top-level field, a Secret's data by key (no
// value). Status and server-set metadata are not compared.
func foreignChanges(ref, o object) []string {
	var out []string
	diff := func(what string, a, b map[string]string) { out = append(out, mapChanges(what, a, b)...) }
	diff("label", ref.GetLabels(), o.GetLabels())
	diff("annotation", ref.GetAnnotations(), o.GetAnnotations())
	fields := func(a, b any) {
		var ma, mb map[string]any
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		_ = json.Unmarshal(ja, &ma)
		_ = json.Unmarshal(jb, &mb)
		keys := slices.Sorted(maps.Keys(ma))
		for _, k := range slices.Sorted(maps.Keys(mb)) {
			if _, ok := ma[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			if !reflect.DeepEqual(ma[k], mb[k]) {
				va, _ := json.Marshal(ma[k])
				vb, _ := json.Marshal(mb[k])
				out = append(out, fmt.Sprintf("spec.%s: %.200s -> %.200s", k, va, vb))
			}
		}
	}
	switch r := ref.(type) {
	case *corev1.Pod:
		fields(r.Spec, o.(*corev1.Pod).Spec)
	case *corev1.Service:
		fields(r.Spec, o.(*corev1.Service).Spec)
	case *corev1.Secret:
		s := o.(*corev1.Secret)
		out = append(out, secretDataDiff(r.Data, s.Data)...)
		if r.Type != s.Type {
			out = append(out, fmt.Sprintf("type %s -> %s", r.Type, s.Type))
		}
	}
	return out
}

// hostMutationRun is what one run of the mutating-host scenario saw.
type hostMutationRun struct {
	// foreign: by tenant object, each change the tenant did not write, and in how many
	// recorded versions of the virtual object it showed
	foreign map[mhObject]map[string]int
	// virtualVersions and hostVersions: recorded versions checked, by tenant object
	virtualVersions, hostVersions map[mhObject]int
	// writes: the syncer's writes of each object (both sides), by auditWrite.key
	writes map[mhObject]map[string]int
	// windowWrites and windowEvents: writes (audit) and events (watch) of the test's objects
	// in the no-loop window after they settled
	windowWrites []auditWrite
	windowEvents []recordedEvent
	// host: the host twins at the end
	host map[mhObject]object
	// read: with synchook, what synchook's GetPhysical gives vcluster of each pod's host twin
	// at the end (synchookRead)
	read map[mhObject]*corev1.Pod
	// syncErrors: vcluster's log lines about failed syncs
	syncErrors []string
	// serviceReplaced: the host gave the Service's twin another cluster IP than the tenant's,
	// so vcluster replaced the tenant's Service by one with the host's (services/syncer.go).
	// Both apiservers allocate from one CIDR, as in a real vcluster: by chance they can pick
	// the same address, and vcluster then replaces nothing.
	serviceReplaced bool
	took            time.Duration
}

// clusterIPs returns a substitution of a Service's cluster IPs by what they are (vcluster
// replaces the tenant's Service by one with the host's cluster IP; the addresses themselves
// differ from run to run).
func clusterIPs(tenant, host *corev1.Service) *strings.Replacer {
	return strings.NewReplacer(tenant.Spec.ClusterIP, "<the virtual apiserver's IP>", host.Spec.ClusterIP, "<the host Service's IP>")
}

// withoutClusterIP returns changes without those of a Service's cluster IPs.
func withoutClusterIP(changes map[string]int) map[string]int {
	out := maps.Clone(changes)
	maps.DeleteFunc(out, func(c string, _ int) bool { return strings.HasPrefix(c, "spec.clusterIP") })
	return out
}

// runMutatingHost runs the scenario: the host policy, the syncer (with synchook when
// withSynchook), the tenant creates a one-key Secret, two pods that use it and a Service,
// waits for the host twins with the host's (and hooks') changes, updates each once, waits
// again, lets them settle, and watches the no-loop window. Every recorded version of the
// virtual objects is compared with what the tenant wrote (foreignChanges).
func runMutatingHost(t *testing.T, withSynchook bool) *hostMutationRun {
	began := time.Now()
	cl, audit := startAuditedClusters(t)
	installHostPolicy(t, cl)
	virtualEvents := recordEvents(t, cl.virtual, tenantNS)
	hostEvents := recordEvents(t, cl.host, hostNamespace)
	recorders := []*eventRecorder{hostEvents, virtualEvents}
	spec := syncerSpec{}
	if withSynchook {
		spec.Plugins = []syncerPlugin{synchookFromPluginYAML(t, mutatingHostConfig(t))}
	}
	s := startSyncer(t, cl, spec)

	ctx := t.Context()
	v := cl.virtual.cs.CoreV1()
	refs := map[mhObject][]object{} // the tenant's versions of each object
	create := func(o mhObject, obj object, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("create %s: %v", o, err)
		}
		refs[o] = []object{obj}
	}
	sec, err := v.Secrets(tenantNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: mhSecret, Namespace: tenantNS},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte(day2Password)},
	}, metav1.CreateOptions{})
	create(mhObject{kindSecret, mhSecret}, sec, err)
	pod, err := v.Pods(tenantNS).Create(ctx, mutatingHostPod(mhPod, true), metav1.CreateOptions{})
	create(mhObject{kindPod, mhPod}, pod, err)
	calm, err := v.Pods(tenantNS).Create(ctx, mutatingHostPod(mhCalmPod, false), metav1.CreateOptions{})
	create(mhObject{kindPod, mhCalmPod}, calm, err)
	svc, err := v.Services(tenantNS).Create(ctx, tenantService(mhService), metav1.CreateOptions{})
	create(mhObject{kindService, mhService}, svc, err)
	objectOf := func(ev recordedEvent) (mhObject, bool) {
		name := ev.obj.GetName()
		if ev.obj.GetNamespace() != tenantNS {
			a := ev.obj.GetAnnotations()
			if a[objectNamespaceAnnotation] != tenantNS {
				return mhObject{}, false
			}
			name = a[objectNameAnnotation]
		}
		o := mhObject{ev.kind, name}
		return o, slices.Contains(mhObjects, o)
	}
	ours := func(ev recordedEvent) bool { _, ok := objectOf(ev); return ok }

	// the host twins, with the host's changes (and the hooks'), and at rev after the update
	ready := func(o mhObject, rev string) func(object) string {
		return func(h object) string {
			if p, ok := h.(*corev1.Pod); ok {
				if miss := hostChangesMissing(p); len(miss) > 0 {
					return fmt.Sprintf("the host's changes missing: %v", miss)
				}
				if img := containerImage(p, "app"); rev != "" && !strings.HasSuffix(img, "nginx:1.28") {
					return "app image " + img
				}
			}
			if rev != "" && h.GetLabels()[mhRevLabel] != rev {
				return "no label rev=" + rev
			}
			if withSynchook && o.kind != kindSecret && h.GetLabels()[hookedLabel] != "true" {
				return "no label " + hookedLabel
			}
			return ""
		}
	}
	for _, o := range mhObjects {
		waitHost(t, cl, o.kind, o.name, ready(o, ""))
	}
	settle(t, recorders, ours)
	created := time.Since(began)

	for _, name := range []string{mhPod, mhCalmPod} {
		if _, err := v.Pods(tenantNS).Patch(ctx, name, types.StrategicMergePatchType, []byte(mhPodPatch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patchVirtual(t, cl, kindSecret, mhSecret, mhLabelPatch)
	if _, err := v.Services(tenantNS).Patch(ctx, mhService, types.MergePatchType, []byte(mhLabelPatch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for o := range refs {
		refs[o] = append(refs[o], afterTenantUpdate(refs[o][0]))
	}
	for _, o := range mhObjects {
		waitHost(t, cl, o.kind, o.name, ready(o, "1"))
	}
	settle(t, recorders, ours)
	updated := time.Since(began)

	// the no-loop window
	window := noLoopWindow(t)
	windowStart := time.Now()
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(window): // the measurement window, not a synchronisation
	}

	run := &hostMutationRun{
		foreign:         map[mhObject]map[string]int{},
		virtualVersions: map[mhObject]int{},
		hostVersions:    map[mhObject]int{},
		writes:          map[mhObject]map[string]int{},
		host:            map[mhObject]object{},
		read:            map[mhObject]*corev1.Pod{},
	}
	hostNames := map[string]mhObject{} // kind/host name
	for _, o := range mhObjects {
		h, err := hostObject(ctx, cl.host.cs, o.kind, o.name)
		if err != nil || h == nil {
			t.Fatalf("host twin of %s: %v", o, err)
		}
		run.host[o] = h
		hostNames[o.kind+"/"+h.GetName()] = o
		run.writes[o] = map[string]int{}
		if p, ok := h.(*corev1.Pod); ok && withSynchook {
			run.read[o] = synchookRead(t, cl, mutatingHostConfig(t), p)
		}
	}
	tenantSvc, hostSvc := refs[mhObject{kindService, mhService}][0].(*corev1.Service), run.host[mhObject{kindService, mhService}].(*corev1.Service)
	ipNames := clusterIPs(tenantSvc, hostSvc)
	run.serviceReplaced = tenantSvc.Spec.ClusterIP != hostSvc.Spec.ClusterIP

	resourceKind := map[string]string{"pods": kindPod, "secrets": kindSecret, "services": kindService}
	writeOf := func(w auditWrite) (mhObject, bool) {
		if !strings.HasPrefix(w.user, "vcluster-") { // the syncer's own users: not the tenant's or the test's writes
			return mhObject{}, false
		}
		kind := resourceKind[w.resource]
		if w.cluster == "host" {
			o, ok := hostNames[kind+"/"+w.name]
			return o, ok && w.namespace == hostNamespace
		}
		o := mhObject{kind, w.name}
		return o, w.namespace == tenantNS && slices.Contains(mhObjects, o)
	}
	for _, w := range audit.writes(t, func(w auditWrite) bool { _, ok := writeOf(w); return ok }) {
		o, _ := writeOf(w)
		run.writes[o][w.key()]++
		if !w.at.Before(windowStart) {
			run.windowWrites = append(run.windowWrites, w)
		}
	}
	for _, r := range recorders {
		evs, err := r.since(windowStart, ours)
		if err != nil {
			t.Fatal(err)
		}
		run.windowEvents = append(run.windowEvents, evs...)
	}

	// every recorded version of the virtual objects against the tenant's versions
	evs, err := virtualEvents.since(time.Time{}, ours)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		o, _ := objectOf(ev)
		if ev.typ == watch.Deleted {
			continue
		}
		run.virtualVersions[o]++
		if p, ok := ev.obj.(*corev1.Pod); ok {
			if c := container(p, appContainer); c != nil && c.SecurityContext != nil {
				t.Errorf("virtual pod %s %s rv %s: container %s has a securityContext %s, which the tenant did not write", o.name, ev.typ, p.ResourceVersion, appContainer, securityContexts(p)[appContainer])
			}
		}
		var best []string
		for i, ref := range refs[o] {
			if d := foreignChanges(ref, ev.obj); i == 0 || len(d) < len(best) {
				best = d
			}
		}
		if run.foreign[o] == nil {
			run.foreign[o] = map[string]int{}
		}
		for _, c := range best {
			run.foreign[o][ipNames.Replace(c)]++
		}
	}

	// every recorded version of the host twins
	hevs, err := hostEvents.since(time.Time{}, ours)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range hevs {
		o, _ := objectOf(ev)
		run.hostVersions[o]++
		switch h := ev.obj.(type) {
		case *corev1.Secret:
			raw, _ := json.Marshal(h)
			if forms := leakedForms(raw, day2Password); withSynchook && len(forms) > 0 {
				t.Errorf("host Secret %s rv %s holds the stripped value (%s)", ev.typ, h.ResourceVersion, strings.Join(forms, ", "))
			}
		case *corev1.Pod:
			if d := duplicateTolerations(h); len(d) > 0 {
				t.Errorf("host pod %s %s rv %s holds tolerations twice: %v", o.name, ev.typ, h.ResourceVersion, d)
			}
			if !withSynchook {
				continue
			}
			if slices.ContainsFunc(h.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == tenantTolerationKey }) {
				t.Errorf("host pod %s %s rv %s has the tenant's toleration %s that synchook strips", o.name, ev.typ, h.ResourceVersion, tenantTolerationKey)
			}
			if _, ok := h.Spec.NodeSelector[tenantNodeSelector]; ok {
				t.Errorf("host pod %s %s rv %s has the nodeSelector %s that synchook strips", o.name, ev.typ, h.ResourceVersion, tenantNodeSelector)
			}
			if img := containerImage(h, "app"); !strings.HasPrefix(img, mirroredNginx+":") {
				t.Errorf("host pod %s %s rv %s pulls %s, not through synchook's mirror", o.name, ev.typ, h.ResourceVersion, img)
			}
			if c := container(h, appContainer); c == nil || c.SecurityContext == nil || !ptr.Deref(c.SecurityContext.RunAsNonRoot, false) || !hostSeccomp(c.SecurityContext) {
				t.Errorf("host pod %s %s rv %s: container %s securityContext %s, want synchook's runAsNonRoot and the host's seccompProfile",
					o.name, ev.typ, h.ResourceVersion, appContainer, securityContexts(h)[appContainer])
			}
		}
	}

	for _, line := range s.log.lines("rror") {
		if strings.Contains(line, "Reconciler error") || strings.Contains(line, "error syncing") || strings.Contains(line, "update object") {
			run.syncErrors = append(run.syncErrors, line)
		}
	}
	if withSynchook {
		loops, err := s.metricSum(ctx, "synchook_loops_detected_total")
		if err != nil {
			t.Fatalf("synchook's metrics: %v", err)
		}
		if loops != 0 {
			t.Errorf("synchook_loops_detected_total = %v, want 0", loops)
		}
		if lines := s.log.lines("loop detected"); len(lines) > 0 {
			t.Errorf("synchook logged loops:\n%s", strings.Join(lines, "\n"))
		}
		requests, _ := s.metricSamples(ctx, "synchook_requests_total")
		byType := map[string]float64{}
		for labels, n := range requests {
			byType[metricLabel(labels, "gvk")+" "+metricLabel(labels, "hook_type")] += n
		}
		skipped, _ := s.metricSamples(ctx, "synchook_undo_entries_skipped_total")
		rejected, _ := s.metricSamples(ctx, "synchook_undo_rejected_total")
		t.Logf("synchook requests %v; undo entries skipped %v; undo rejected %v", byType, skipped, rejected)
	}
	run.took = time.Since(began)
	t.Logf("created and settled after %s, updated and settled after %s, window %s, whole run %s",
		created.Round(time.Millisecond), updated.Round(time.Millisecond), window, run.took.Round(time.Millisecond))
	for _, o := range mhObjects {
		t.Logf("%s: %d virtual and %d host versions; the virtual object showed, beyond what the tenant wrote: %v",
			o, run.virtualVersions[o], run.hostVersions[o], run.foreign[o])
		t.Logf("%s: the syncer's writes (cluster resource verb code: count): %v", o, run.writes[o])
		t.Logf("%s: host twin at the end: %s", o, briefHost(run.host[o]))
	}
	t.Logf("vcluster's log lines about failed syncs: %d", len(run.syncErrors))
	for _, l := range run.syncErrors[:min(5, len(run.syncErrors))] {
		t.Logf("  %.400s", l)
	}
	return run
}

// synchookRead returns what synchook's GetPhysical gives the syncer of the host pod p: the
// synchook binary's `mutate --type GetPhysical` with the hook config cfg and the key ring of
// the undo key Secret synchook keeps in the host namespace (so that p's sealed undo opens and
// applies, as in the plugin). The ring goes to a 0600 file in a temporary directory and is
// never printed.
func synchookRead(tb testing.TB, cl *clusters, cfg map[string]any, p *corev1.Pod) *corev1.Pod {
	tb.Helper()
	ctx := tb.Context()
	sec, err := cl.host.cs.CoreV1().Secrets(hostNamespace).Get(ctx, keySecretName, metav1.GetOptions{})
	if err != nil {
		tb.Fatalf("the undo key Secret: %v", err)
	}
	dir := tb.TempDir()
	pod := p.DeepCopy()
	pod.APIVersion, pod.Kind = "v1", "Pod"
	rawCfg, err := yaml.Marshal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	rawPod, err := json.Marshal(pod)
	if err != nil {
		tb.Fatal(err)
	}
	files := map[string][]byte{"keys": sec.Data["keys"], "config.yaml": rawCfg, "pod.json": rawPod}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary(tb, binSynchook), "mutate", "--type", "GetPhysical", "-o", "json",
		"--config", filepath.Join(dir, "config.yaml"), "--undo-key-file", filepath.Join(dir, "keys"), "-f", filepath.Join(dir, "pod.json"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("synchook mutate --type GetPhysical of host pod %s: %v\n%s", p.Name, err, stderr.String())
	}
	var read corev1.Pod
	if err := json.Unmarshal(stdout.Bytes(), &read); err != nil {
		tb.Fatalf("synchook mutate --type GetPhysical of host pod %s: %v\n%.2000s", p.Name, err, stdout.String())
	}
	return &read
}

// securityContexts returns each container's securityContext of a pod, by container name, as
// JSON ("" for none).
func securityContexts(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, c := range p.Spec.Containers {
		out[c.Name] = ""
		if c.SecurityContext != nil {
			raw, _ := json.Marshal(c.SecurityContext)
			out[c.Name] = string(raw)
		}
	}
	return out
}

// briefHost is brief with a pod's containers, volumes and a Secret's data keys (never values).
func briefHost(o object) string {
	out := brief(o)
	switch x := o.(type) {
	case *corev1.Pod:
		var cs, vs []string
		for _, c := range x.Spec.Containers {
			cs = append(cs, c.Name+"="+c.Image)
		}
		for _, v := range x.Spec.Volumes {
			vs = append(vs, v.Name)
		}
		out += fmt.Sprintf(" containers %v volumes %v", cs, vs)
	case *corev1.Secret:
		out += fmt.Sprintf(" data keys %v", slices.Sorted(maps.Keys(x.Data)))
	}
	return out
}

// TestVClusterSyncerMutatingHost: the host kube-apiserver has its own MutatingAdmissionPolicy
// (a sidecar and a volume, a label and an annotation, a toleration, a registry rewrite, a
// seccompProfile in the app container's securityContext, on pod CREATE and UPDATE). The same
// scenario runs without synchook (the baseline: what vcluster itself does with that host) and
// with synchook (plugin.yaml's labels, the docker.io mirror, strips of the pods' only
// nodeSelector key and of every toleration, the one-key Secret strip, a policy hook that
// annotates Services and one that makes the app container's securityContext with
// runAsNonRoot: a parent the tenant's pod does not have, into which the host adds). The tenant
// creates and updates two pods, a one-key Secret and a Service. With synchook:
//   - every recorded version of the tenant's objects shows, beyond what the tenant wrote
//     (with its apiserver's defaults), exactly what the baseline's showed (vcluster's own
//     copying of the host's changes), and no trace of synchook (no securityContext on the
//     tenant's app container);
//   - every host version holds the hooks' changes and the host's (the app container's
//     securityContext: runAsNonRoot and seccompProfile);
//   - what synchook's GetPhysical gives vcluster of each host pod at the end (synchookRead)
//     holds the containers' securityContexts as the host stores them without synchook: the
//     host's seccompProfile without the hooks' runAsNonRoot (undo.takeBack, d06792a). This
//     one compares the read itself: vcluster v0.36.1 copies no pod spec from the host to the
//     tenant, so a read that kept runAsNonRoot shows in no virtual version (with the rule off
//     in undo.Apply only this check fails, naming both securityContexts);
//   - the syncer makes no write of any of the objects (no-op and failed ones counted, from the
//     apiservers' audit logs) that the baseline does not, and nothing changes in the no-loop
//     window (SYNCHOOK_NO_LOOP_WINDOW, default 30 s, in each run).
//
// What vcluster v0.36.1 itself does with this host (the baseline, and the same with synchook):
// it copies the host policy's label and annotation into the tenant's pods (its two-way
// metadata merge) but none of the spec (sidecar, volume, toleration, image); it writes the
// tenant's image back over the host's registry rewrite at every sync of pod web (a no-op
// Update: the policy rewrites it again); and it deletes the tenant's Service and creates it
// again with the host Service's cluster IP.
//
// The write count fails for pod api at 4cd8bd1 (4 host pod updates with synchook, 2 without,
// all no-ops): the Pod chain holds typed hooks (labels, image), so the engine encodes the typed
// pod, which drops the list the strip of every toleration emptied; the undo records the whole
// field /spec/tolerations as removed, and the read meets the tolerations the host added back
// (DefaultTolerationSeconds' and the policy's): SkipChanged. The view then lacks the tenant's
// own toleration, vcluster puts it back and writes the pod at every sync; the strip takes it
// off again. Pod web hides the same extra write in its image fight.
// TestVClusterSyncerStrippedTolerationsNotDoubled covers the per-element case.
func TestVClusterSyncerMutatingHost(t *testing.T) {
	requireEnvtest(t)
	began := time.Now()
	var baseline, with *hostMutationRun
	t.Run("baseline: vcluster without synchook", func(t *testing.T) {
		baseline = runMutatingHost(t, false)
		for _, o := range mhObjects {
			if p, ok := baseline.host[o].(*corev1.Pod); ok {
				if miss := hostChangesMissing(p); len(miss) > 0 {
					t.Errorf("the host twin of %s lacks the host's changes %v", o, miss)
				}
				if c := container(p, appContainer); c == nil || c.SecurityContext == nil || c.SecurityContext.RunAsNonRoot != nil {
					t.Errorf("the host twin of %s: container %s securityContext %s, want the host's seccompProfile alone", o, appContainer, securityContexts(p)[appContainer])
				}
			}
		}
	})
	t.Run("with synchook", func(t *testing.T) {
		with = runMutatingHost(t, true)
		for _, o := range mhObjects {
			switch h := with.host[o].(type) {
			case *corev1.Pod:
				if miss := hostChangesMissing(h); len(miss) > 0 {
					t.Errorf("the host twin of %s lacks the host's changes %v", o, miss)
				}
				if got := containerImage(h, "app"); got != mirroredNginx+":1.28" {
					t.Errorf("host twin of %s: app image %s, want synchook's mirror of the tenant's nginx:1.28", o, got)
				}
				if got := containerImage(h, "tools"); o.name == mhPod && got != hostMirror+"org/tools:1" {
					t.Errorf("host twin of %s: tools image %s, want the host's mirror", o, got)
				}
				if h.Labels[hookedLabel] != "true" || h.Labels[mhRevLabel] != "1" {
					t.Errorf("host twin of %s: labels %v, want synchook's %s and the tenant's rev=1", o, h.Labels, hookedLabel)
				}
				for _, key := range []string{"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} {
					if !slices.ContainsFunc(h.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == key }) {
						t.Errorf("host twin of %s: tolerations %v, the host's default %s is missing", o, h.Spec.Tolerations, key)
					}
				}
				if len(h.Spec.NodeSelector) > 0 {
					t.Errorf("host twin of %s: nodeSelector %v, want none (the tenant's only key is stripped)", o, h.Spec.NodeSelector)
				}
				if c := container(h, appContainer); c == nil || c.SecurityContext == nil || !ptr.Deref(c.SecurityContext.RunAsNonRoot, false) || !hostSeccomp(c.SecurityContext) {
					t.Errorf("host twin of %s: container %s securityContext %s, want synchook's runAsNonRoot and the host's seccompProfile",
						o, appContainer, securityContexts(h)[appContainer])
				}
			case *corev1.Secret:
				if len(h.Data) > 0 || h.Labels[mhRevLabel] != "1" || undoKeyID(h.Annotations[undoAnnotation]) == "" {
					t.Errorf("host Secret: data keys %v, labels %v, undo sealed %v: want no data, the tenant's rev=1 and a sealed undo",
						slices.Sorted(maps.Keys(h.Data)), h.Labels, undoKeyID(h.Annotations[undoAnnotation]) != "")
				}
			case *corev1.Service:
				if h.Labels[hookedLabel] != "true" || h.Annotations[lbAnnotation] != "internal" || h.Labels[mhRevLabel] != "1" {
					t.Errorf("host Service: labels %v, annotations %v: want %s, %s=internal and rev=1", h.Labels, h.Annotations, hookedLabel, lbAnnotation)
				}
			}
		}
	})
	if baseline == nil || with == nil {
		t.Fatal("a run did not finish")
	}

	t.Run("the tenant's objects show what they show without synchook, in every version", func(t *testing.T) {
		for _, o := range mhObjects {
			b, w := baseline.foreign[o], with.foreign[o]
			if o.kind == kindService && baseline.serviceReplaced != with.serviceReplaced {
				// one run's allocators picked the same cluster IP on both sides (see
				// serviceReplaced): vcluster's own replacement of the Service happened in one
				// run only, and its changes are not synchook's to match
				t.Logf("virtual %s: replaced by vcluster for its cluster IP without synchook %v, with synchook %v: its cluster IP changes not compared",
					o, baseline.serviceReplaced, with.serviceReplaced)
				b, w = withoutClusterIP(b), withoutClusterIP(w)
			}
			for _, c := range slices.Sorted(maps.Keys(w)) {
				if _, ok := b[c]; !ok {
					t.Errorf("virtual %s: %d versions show %q, which no version showed without synchook", o, w[c], c)
				}
			}
			for _, c := range slices.Sorted(maps.Keys(b)) {
				if _, ok := w[c]; !ok {
					t.Errorf("virtual %s: without synchook %d versions show %q (vcluster's own behaviour), with synchook none", o, b[c], c)
				}
			}
			if with.virtualVersions[o] == 0 {
				t.Errorf("no version of the virtual %s recorded", o)
			}
		}
	})

	t.Run("the read of each host pod gives its containers' securityContext as the host stores it without synchook", func(t *testing.T) {
		// vcluster v0.36.1 copies no pod spec from the host to the tenant (only status, labels
		// and annotations), so a read that kept the hooks' runAsNonRoot would show in no version
		// of the virtual pod: the read itself is compared with the baseline's host twin.
		for _, o := range mhObjects {
			read, ok := with.read[o]
			if o.kind != kindPod {
				continue
			}
			if !ok {
				t.Errorf("no read of the host twin of %s", o)
				continue
			}
			got, want := securityContexts(read), securityContexts(baseline.host[o].(*corev1.Pod))
			if !maps.Equal(got, want) {
				t.Errorf("%s: the read gives the containers' securityContexts %v; the host stores without synchook %v", o, got, want)
			}
			t.Logf("%s: the read's securityContexts %v; the host twin's with synchook %v", o, got, securityContexts(with.host[o].(*corev1.Pod)))
		}
	})

	t.Run("synchook adds no write, no failed write and no loop", func(t *testing.T) {
		for _, o := range mhObjects {
			if o.kind == kindService && baseline.serviceReplaced != with.serviceReplaced {
				// vcluster replaced the Service (a virtual delete and create, and the host
				// twin's updates after it) in one run only (serviceReplaced): not synchook's
				t.Logf("%s: replaced by vcluster in one run only: its writes not compared (%v with synchook, %v without)", o, with.writes[o], baseline.writes[o])
				continue
			}
			keys := slices.Sorted(maps.Keys(with.writes[o]))
			for _, k := range keys {
				if o == (mhObject{kindPod, mhPod}) && (strings.HasSuffix(k, " 200") || strings.HasSuffix(k, " 201")) {
					// vcluster writes this pod's image back over the host's registry rewrite at
					// every sync, with or without synchook (a no-op the host's policy undoes): its
					// successful writes count the syncs, which timing decides (5 against 4 once
					// under load). The calm pod is the write count that speaks for synchook;
					// this one's failed writes and the no-loop window still count.
					continue
				}
				if with.writes[o][k] > baseline.writes[o][k] {
					t.Errorf("%s: %s: %d with synchook, %d without", o, k, with.writes[o][k], baseline.writes[o][k])
				}
			}
		}
		if len(with.windowWrites) > 0 || len(with.windowEvents) > 0 {
			var ws []string
			for _, w := range with.windowWrites {
				ws = append(ws, w.String())
			}
			t.Errorf("with synchook, in the no-loop window: %d writes, %d events of the test's objects:\n  %s",
				len(with.windowWrites), len(with.windowEvents), strings.Join(ws, "\n  "))
		}
		if len(with.syncErrors) > len(baseline.syncErrors) {
			t.Errorf("vcluster logged %d failed syncs with synchook, %d without", len(with.syncErrors), len(baseline.syncErrors))
		}
		t.Logf("baseline window: %d writes, %d events", len(baseline.windowWrites), len(baseline.windowEvents))
	})
	var hv, vv int
	for _, o := range mhObjects {
		hv += baseline.hostVersions[o] + with.hostVersions[o]
		vv += baseline.virtualVersions[o] + with.virtualVersions[o]
	}
	t.Logf("whole test: %s (baseline %s, with synchook %s); %d host and %d virtual versions checked in both runs",
		time.Since(began).Round(time.Millisecond), baseline.took.Round(time.Millisecond), with.took.Round(time.Millisecond), hv, vv)
}
