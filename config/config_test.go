package config_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/config"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/patch"
)

// exampleYAML is the example of the package documentation.
const exampleYAML = `
hooks:
  - name: team-labels            # unique; default "<kind-of-hook>-<index>" e.g. labels-0
    resources:                   # one or more
      - apiVersion: v1
        kind: Pod
    types: [CreatePhysical, UpdatePhysical]
    namespaces: [team-a]         # optional
    objectSelector:              # optional, metav1.LabelSelector
      matchLabels: {sync: "yes"}
    labels:                      # exactly one of labels / strip
      labels: {team: a}
      annotations: {owner: "team-a"}
  - name: strip-host-annotations
    resources: [{apiVersion: v1, kind: Pod}]
    types: [GetPhysical, UpdateVirtual]
    strip:
      paths: ["/metadata/annotations/host.example.com~1internal", "/status/hostIP"]
`

// defaultYAML is the default of the package documentation.
const defaultYAML = `
hooks:
  - name: default-labels
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical, UpdatePhysical]
    labels:
      labels: {synchook.io/hooked: "true"}
`

var podGVK = corev1.SchemeGroupVersion.WithKind("Pod")

// podJSON returns the JSON of a Pod in namespace ns with labels.
func podJSON(t *testing.T, ns string, labels map[string]string) []byte {
	t.Helper()
	b, err := json.Marshal(&corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: labels, Annotations: map[string]string{"host.example.com/internal": "x"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		Status:     corev1.PodStatus{HostIP: "10.0.0.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// run runs the chain of (gvk, typ) on raw and returns the patched object, or nil when the
// result has no patch.
func run(t *testing.T, reg *engine.Registry, gvk schema.GroupVersionKind, typ hooks.HookType, raw []byte) map[string]any {
	t.Helper()
	res, err := reg.Mutate(t.Context(), gvk, typ, raw)
	if err != nil {
		t.Fatalf("Run %s: %v", typ, err)
	}
	if res.Patch == nil {
		return nil
	}
	out, err := patch.Apply(raw, res.Patch)
	if err != nil {
		t.Fatalf("apply %s: %v", res.Patch, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(out, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// lookup returns obj[path[0]][path[1]]… or nil.
func lookup(obj map[string]any, path ...string) any {
	var v any = obj
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func TestParseExample(t *testing.T) {
	c, err := config.Parse([]byte(exampleYAML))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &config.Config{Hooks: []config.Hook{
		{
			Name:           "team-labels",
			Resources:      []config.Resource{{APIVersion: "v1", Kind: "Pod"}},
			Types:          []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical},
			Namespaces:     []string{"team-a"},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"sync": "yes"}},
			Labels: &builtin.Labels{
				Labels:      map[string]string{"team": "a"},
				Annotations: map[string]string{"owner": "team-a"},
			},
		},
		{
			Name:      "strip-host-annotations",
			Resources: []config.Resource{{APIVersion: "v1", Kind: "Pod"}},
			Types:     []hooks.HookType{hooks.GetPhysical, hooks.UpdateVirtual},
			Strip:     &builtin.Strip{Paths: []string{"/metadata/annotations/host.example.com~1internal", "/status/hostIP"}},
		},
	}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Parse = %+v\nwant %+v", c, want)
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, c *config.Config)
	}{
		{
			name: "an empty document has no hooks",
			yaml: "",
			check: func(t *testing.T, c *config.Config) {
				if len(c.Hooks) != 0 {
					t.Errorf("hooks = %+v, want none", c.Hooks)
				}
			},
		},
		{
			name: "an empty hook list has no hooks",
			yaml: "hooks: []",
			check: func(t *testing.T, c *config.Config) {
				if len(c.Hooks) != 0 {
					t.Errorf("hooks = %+v, want none", c.Hooks)
				}
			},
		},
		{
			name: "entries without a name get the kind of hook and their index",
			yaml: `
hooks:
  - {resources: [{apiVersion: v1, kind: Pod}], types: [GetPhysical], strip: {paths: [/status]}}
  - {resources: [{apiVersion: v1, kind: Pod}], types: [CreatePhysical], labels: {labels: {a: b}}}
`,
			check: func(t *testing.T, c *config.Config) {
				if c.Hooks[0].Name != "strip-0" || c.Hooks[1].Name != "labels-1" {
					t.Errorf("names = %q, %q, want strip-0, labels-1", c.Hooks[0].Name, c.Hooks[1].Name)
				}
			},
		},
		{
			name: "a kind of a group the scheme does not know is a custom resource",
			yaml: `
hooks:
  - resources: [{apiVersion: example.com/v1alpha1, kind: Widget}, {apiVersion: apps/v1, kind: Deployment}]
    types: [CreatePhysical]
    labels: {annotations: {note: x}}
`,
			check: func(t *testing.T, c *config.Config) {
				if got := c.Hooks[0].Resources[0]; got != (config.Resource{APIVersion: "example.com/v1alpha1", Kind: "Widget"}) {
					t.Errorf("resource = %v", got)
				}
			},
		},
		{
			name: "unquoted YAML booleans and numbers become strings, as with kubectl",
			yaml: `
hooks:
  - resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    labels: {labels: {sync: yes, version: 2}}
`,
			check: func(t *testing.T, c *config.Config) {
				if want := map[string]string{"sync": "true", "version": "2"}; !reflect.DeepEqual(c.Hooks[0].Labels.Labels, want) {
					t.Errorf("labels = %v, want %v", c.Hooks[0].Labels.Labels, want)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestParseRejects(t *testing.T) {
	// entry wraps the body of one hook entry (indented by four spaces) into a config.
	entry := func(body string) string { return "hooks:\n  - " + strings.TrimSpace(body) + "\n" }
	const podLabels = "resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labels: {labels: {a: b}}\n"
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error message
		is   error    // an error the error must wrap, besides ErrInvalid
		n    int      // when set, the number of problems (entries of the error's Aggregate)
	}{
		{
			name: "a misspelt key of an entry names the key and the entry",
			yaml: "hooks:\n  - " + podLabels + "  - name: second\n    resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labls: {labels: {a: b}}\n",
			want: []string{`hooks[1]: unknown field "labls"`, "valid: bindings, bindingsFile, hostParams, image, labels, name, namespaces, objectSelector, params, paramsFile, policy, policyFile, resources, strip, types, undo"},
		},
		{
			name: "a misspelt key inside the labels block names the block",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labels: {lables: {a: b}}"),
			want: []string{`hooks[0].labels: unknown field "lables"`, "valid: annotations, fromNamespace, labels"},
		},
		{
			name: "a misspelt top-level key is named",
			yaml: "hoks: []\n",
			want: []string{`unknown field "hoks"`},
		},
		{
			name: "keys are case-sensitive",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    Types: [CreatePhysical]\n    labels: {labels: {a: b}}"),
			want: []string{`hooks[0]: unknown field "Types"`},
		},
		{
			name: "a duplicate YAML key is an error",
			yaml: entry("name: a\n    name: b\n    " + podLabels),
			want: []string{`"name" already set`},
		},
		{
			name: "YAML that does not parse is an error",
			yaml: "hooks: [\n",
			want: []string{"yaml:"},
		},
		{
			name: "a scalar where a list belongs names the field",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: CreatePhysical\n    labels: {labels: {a: b}}"),
			want: []string{"hooks[0].types: a string, want a list"},
		},
		{
			name: "an unknown hook type names its position and lists the valid ones",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical, CreatPhysical]\n    labels: {labels: {a: b}}"),
			want: []string{`hooks[0].types[1]: Invalid value: unknown hook type "CreatPhysical" (valid: CreatePhysical, UpdatePhysical`},
			is:   hooks.ErrUnknownHookType,
		},
		{
			name: "a missing types key is an error",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    labels: {labels: {a: b}}"),
			want: []string{"hooks[0].types: Required value: at least one of CreatePhysical, UpdatePhysical"},
		},
		{
			name: "an empty types list is an error",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: []\n    labels: {labels: {a: b}}"),
			want: []string{"hooks[0].types: Required value: at least one of CreatePhysical, UpdatePhysical"},
		},
		{
			name: "a repeated hook type is an error",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [GetPhysical, GetPhysical]\n    labels: {labels: {a: b}}"),
			want: []string{`hooks[0].types[1]: Duplicate value: "GetPhysical": also hooks[0].types[0]`},
		},
		{
			name: "an empty resources list is an error",
			yaml: entry("resources: []\n    types: [CreatePhysical]\n    labels: {labels: {a: b}}"),
			want: []string{"hooks[0].resources: Required value: at least one resource"},
		},
		{
			name: "an apiVersion with two slashes is an error",
			yaml: entry("resources: [{apiVersion: a/b/c, kind: Pod}]\n    types: [CreatePhysical]\n    labels: {labels: {a: b}}"),
			want: []string{`hooks[0].resources[0].apiVersion: Invalid value: "a/b/c"`},
		},
		{
			name: "a missing kind is an error",
			yaml: entry("resources: [{apiVersion: v1}]\n    types: [CreatePhysical]\n    labels: {labels: {a: b}}"),
			want: []string{"hooks[0].resources[0].kind: Required value"},
		},
		{
			name: "a misspelt kind in a known group/version is named with a suggestion",
			yaml: entry("resources: [{apiVersion: v1, kind: Pdo}]\n    types: [CreatePhysical]\n    labels: {labels: {a: b}}"),
			want: []string{`hooks[0].resources[0].kind: Invalid value: "Pdo": unknown kind in v1 (did you mean "Pod"?)`},
		},
		{
			name: "a kind in the wrong case is named with a suggestion",
			yaml: entry("resources: [{apiVersion: apps/v1, kind: deployment}]\n    types: [CreatePhysical]\n    labels: {labels: {a: b}}"),
			want: []string{`Invalid value: "deployment": unknown kind in apps/v1 (did you mean "Deployment"?)`},
		},
		{
			name: "an unknown version of a known group is an error",
			yaml: entry("resources: [{apiVersion: apps/v2, kind: Deployment}]\n    types: [CreatePhysical]\n    labels: {labels: {a: b}}"),
			want: []string{`hooks[0].resources[0].apiVersion: Unsupported value: "apps/v2": supported values: "apps/v1"`},
		},
		{
			name: "a list kind is an error",
			yaml: entry("resources: [{apiVersion: v1, kind: PodList}]\n    types: [CreatePhysical]\n    labels: {labels: {a: b}}"),
			want: []string{`hooks[0].resources[0].kind: Invalid value: "PodList": v1 PodList is not an object kind`},
		},
		{
			name: "a repeated resource is an error",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}, {apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labels: {labels: {a: b}}"),
			want: []string{`hooks[0].resources[1]: Duplicate value: "v1 Pod": also hooks[0].resources[0]`},
		},
		{
			name: "an entry with neither labels nor strip is an error",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]"),
			want: []string{"hooks[0]: Required value: one of labels, strip, image, policy or policyFile"},
		},
		{
			name: "an entry with both labels and strip is an error",
			yaml: entry(podLabels + "    strip: {paths: [/status]}"),
			want: []string{"hooks[0]: Forbidden: only one of labels, strip, image, policy and policyFile can be set"},
		},
		{
			name: "duplicate names are an error naming both entries",
			yaml: "hooks:\n  - name: same\n    " + podLabels + "  - name: same\n    " + podLabels,
			want: []string{`hooks[1].name: Duplicate value: "same": hook name already used by hooks[0]`},
		},
		{
			name: "a name that collides with a default name is an error",
			yaml: "hooks:\n  - name: labels-1\n    " + podLabels + "  - " + podLabels,
			want: []string{`hooks[1].name: Duplicate value: "labels-1": hook name already used by hooks[0]`},
		},
		{
			name: "a name that collides with a per-resource name is an error",
			yaml: "hooks:\n  - name: x/Pod\n    " + podLabels +
				"  - name: x\n    resources: [{apiVersion: v1, kind: Pod}, {apiVersion: v1, kind: Service}]\n    types: [CreatePhysical]\n    labels: {labels: {a: b}}\n",
			want: []string{`hooks[0].name: Invalid value: "x/Pod"`, `hooks[1].resources[0]: Duplicate value: "x/Pod": hook name already used by hooks[0]`},
		},
		{
			name: "a malformed JSON Pointer names the path and its position",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [GetPhysical]\n    strip: {paths: [/status, status/hostIP]}"),
			want: []string{`hooks[0].strip.paths[1]: Invalid value: invalid JSON Pointer "status/hostIP"`},
			is:   builtin.ErrInvalidPointer,
		},
		{
			name: "a bad escape in a JSON Pointer is an error",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [GetPhysical]\n    strip: {paths: [/metadata/annotations/a~2b]}"),
			want: []string{`hooks[0].strip.paths[0]: Invalid value: invalid JSON Pointer "/metadata/annotations/a~2b"`},
		},
		{
			name: "a wildcard where the Go type has an object names the step",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    strip: {paths: [/spec/topologySpreadConstraints/*/matchLabelKeys, /spec/*/nodeName]}"),
			want: []string{`hooks[0].strip.paths[1]: Invalid value: invalid JSON Pointer "/spec/*/nodeName": step 2 "*" never matches: "/spec" is an object`},
			is:   builtin.ErrInvalidPointer,
		},
		{
			name: "a key where the Go type has an array names the step",
			yaml: entry("resources: [{apiVersion: apps/v1, kind: Deployment}]\n    types: [CreatePhysical]\n    strip: {paths: [/spec/template/spec/containers/image]}"),
			want: []string{`hooks[0].strip.paths[0]: Invalid value: invalid JSON Pointer "/spec/template/spec/containers/image": step 5 "image" never matches`},
		},
		{
			name: "a protected JSON Pointer is an error",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [GetPhysical]\n    strip: {paths: [/metadata]}"),
			want: []string{`hooks[0].strip.paths[0]:`, `"/metadata" would also remove /metadata/name`},
			is:   builtin.ErrProtectedPath,
		},
		{
			name: "an empty strip block is an error",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [GetPhysical]\n    strip: {}"),
			want: []string{"hooks[0].strip.paths: Required value: at least one JSON Pointer"},
		},
		{
			name: "an empty labels block is an error",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labels: {}"),
			want: []string{"hooks[0].labels: Required value: set labels, annotations, fromNamespace or more than one"},
		},
		{
			name: "an invalid label key is named",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labels: {labels: {\"team a\": x}}"),
			want: []string{`hooks[0].labels.labels[team a]: Invalid value: "team a": name part must consist of`},
		},
		{
			name: "an invalid label value is named",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labels: {labels: {team: \"a b!\"}}"),
			want: []string{`hooks[0].labels.labels[team]: Invalid value: "a b!": a valid label must be`},
		},
		{
			name: "an invalid annotation key is named",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labels: {annotations: {\"-bad\": x}}"),
			want: []string{`hooks[0].labels.annotations: Invalid value: "-bad": name part must consist of`},
		},
		{
			name: "an invalid selector operator is named",
			yaml: entry(podLabels + "    objectSelector: {matchExpressions: [{key: app, operator: Inn, values: [x]}]}"),
			want: []string{"hooks[0].objectSelector.matchExpressions[0].operator", `"Inn"`},
		},
		{
			name: "an invalid selector label value is named",
			yaml: entry(podLabels + "    objectSelector: {matchLabels: {app: \"a b\"}}"),
			want: []string{"hooks[0].objectSelector.matchLabels", `"a b"`},
		},
		{
			name: "an invalid namespace is named",
			yaml: entry(podLabels + "    namespaces: [team-a, Team_B]"),
			want: []string{`hooks[0].namespaces[1]: Invalid value: "Team_B": a lowercase RFC 1123 label`},
		},
		{
			name: "an empty namespace list is an error",
			yaml: entry(podLabels + "    namespaces: []"),
			want: []string{"hooks[0].namespaces: Required value: an empty list matches no object"},
		},
		{
			name: "every problem is reported, not only the first",
			yaml: "hooks:\n  - resources: [{apiVersion: v1, kind: Pdo}]\n    types: [Create]\n    labels: {}\n" +
				"  - resources: [{apiVersion: v1, kind: Pod}]\n    types: [GetPhysical]\n    strip: {paths: [x]}\n",
			want: []string{"hooks[0].resources[0].kind", "hooks[0].types[0]", "hooks[0].labels", "hooks[1].strip.paths[0]"},
			n:    4,
		},
		{
			name: "every unknown key of every entry is reported",
			yaml: "hooks:\n  - " + podLabels + "    nme: a\n  - " + podLabels + "    Namespaces: [a]\n    objectSelector: {matchLabel: {a: b}}\n",
			want: []string{
				`hooks[0]: unknown field "nme"`, `hooks[1]: unknown field "Namespaces"`,
				`hooks[1].objectSelector: unknown field "matchLabel" (valid: matchExpressions, matchLabels)`,
			},
			n: 3,
		},
		{
			name: "a list where a string belongs names the entry and the field",
			yaml: entry("resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labels: {labels: {a: [x]}}"),
			want: []string{"hooks[0].labels.labels: a list, want a string"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse = %+v, want an error", c)
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v does not wrap %v", err, tt.is)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			var agg utilerrors.Aggregate
			if !errors.As(err, &agg) {
				t.Fatalf("error %v has no Aggregate", err)
			}
			if tt.n != 0 && len(agg.Errors()) != tt.n {
				t.Errorf("%d problems, want %d: %v", len(agg.Errors()), tt.n, err)
			}
		})
	}
}

func TestValidateReturnsFieldErrors(t *testing.T) {
	c := &config.Config{Hooks: []config.Hook{{
		Resources:  []config.Resource{{APIVersion: "v1", Kind: "Pod"}},
		Types:      []hooks.HookType{hooks.CreatePhysical},
		Namespaces: []string{"Team_B"},
		Labels:     &builtin.Labels{Labels: map[string]string{"b": "x y", "a/b/c": "x"}},
	}}}
	err := c.Validate()
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("Validate = %v, want an error wrapping ErrInvalid", err)
	}
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		t.Fatalf("error %v has no Aggregate", err)
	}
	var got []string
	for _, e := range agg.Errors() {
		var fe *field.Error
		if !errors.As(e, &fe) {
			t.Fatalf("problem %v is no *field.Error", e)
		}
		got = append(got, string(fe.Type)+" "+fe.Field)
	}
	want := []string{
		"FieldValueInvalid hooks[0].namespaces[0]",
		"FieldValueInvalid hooks[0].labels.labels[a/b/c]",
		"FieldValueInvalid hooks[0].labels.labels[b]",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems = %q, want %q (in this order)", got, want)
	}
	if !strings.HasPrefix(err.Error(), "invalid synchook config: [hooks[0].namespaces[0]: Invalid value: \"Team_B\": ") {
		t.Errorf("error = %v, want ErrInvalid's text followed by the Aggregate's", err)
	}
}

func TestBuildExample(t *testing.T) {
	c, err := config.Parse([]byte(exampleYAML))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	reg := engine.NewRegistry(nil)
	if err := c.Build(reg); err != nil {
		t.Fatalf("Build: %v", err)
	}
	want := engine.Capabilities{Resources: []engine.ResourceCapabilities{{
		APIVersion: "v1", Kind: "Pod",
		HookTypes: []engine.HookTypeCapabilities{
			{Type: hooks.CreatePhysical, Hooks: []string{"team-labels"}},
			{Type: hooks.UpdatePhysical, Hooks: []string{"team-labels"}},
			{Type: hooks.GetPhysical, Hooks: []string{"strip-host-annotations"}},
			{Type: hooks.UpdateVirtual, Hooks: []string{"strip-host-annotations"}},
		},
	}}}
	if got := reg.Capabilities(); !reflect.DeepEqual(got, want) {
		t.Errorf("Capabilities = %+v\nwant %+v", got, want)
	}

	tests := []struct {
		name  string
		typ   hooks.HookType
		raw   []byte
		check func(t *testing.T, obj map[string]any)
	}{
		{
			name: "a matching Pod on CreatePhysical gets the label and the annotation",
			typ:  hooks.CreatePhysical,
			raw:  podJSON(t, "team-a", map[string]string{"sync": "yes"}),
			check: func(t *testing.T, obj map[string]any) {
				if obj == nil {
					t.Fatal("no patch")
				}
				if got := lookup(obj, "metadata", "labels", "team"); got != "a" {
					t.Errorf("label team = %v, want a", got)
				}
				if got := lookup(obj, "metadata", "labels", "sync"); got != "yes" {
					t.Errorf("label sync = %v, want it kept", got)
				}
				if got := lookup(obj, "metadata", "annotations", "owner"); got != "team-a" {
					t.Errorf("annotation owner = %v, want team-a", got)
				}
			},
		},
		{
			name: "a Pod in another namespace passes through",
			typ:  hooks.CreatePhysical,
			raw:  podJSON(t, "team-b", map[string]string{"sync": "yes"}),
			check: func(t *testing.T, obj map[string]any) {
				if obj != nil {
					t.Errorf("got a patch, want none: %v", obj)
				}
			},
		},
		{
			name: "a Pod without the selected label passes through",
			typ:  hooks.UpdatePhysical,
			raw:  podJSON(t, "team-a", nil),
			check: func(t *testing.T, obj map[string]any) {
				if obj != nil {
					t.Errorf("got a patch, want none: %v", obj)
				}
			},
		},
		{
			name: "a Pod read back on GetPhysical loses the host annotation and hostIP",
			typ:  hooks.GetPhysical,
			raw:  podJSON(t, "team-b", nil),
			check: func(t *testing.T, obj map[string]any) {
				if obj == nil {
					t.Fatal("no patch")
				}
				if got := lookup(obj, "metadata", "annotations", "host.example.com/internal"); got != nil {
					t.Errorf("annotation still there: %v", got)
				}
				if got := lookup(obj, "status", "hostIP"); got != nil {
					t.Errorf("status.hostIP still there: %v", got)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, run(t, reg, podGVK, tt.typ, tt.raw))
		})
	}
}

func TestBuildSeveralResources(t *testing.T) {
	c, err := config.Parse([]byte(`
hooks:
  - name: mark
    resources: [{apiVersion: v1, kind: Pod}, {apiVersion: example.com/v1, kind: Widget}]
    types: [CreatePhysical]
    labels: {labels: {marked: "true"}}
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	reg := engine.NewRegistry(nil)
	if err := c.Build(reg); err != nil {
		t.Fatalf("Build: %v", err)
	}
	caps := reg.Capabilities()
	var names []string
	for _, r := range caps.Resources {
		names = append(names, r.APIVersion+" "+r.Kind+" "+strings.Join(r.HookTypes[0].Hooks, ","))
	}
	if want := []string{"v1 Pod mark/Pod", "example.com/v1 Widget mark/Widget"}; !reflect.DeepEqual(names, want) {
		t.Errorf("capabilities = %q, want %q", names, want)
	}

	widgetGVK := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	obj := run(t, reg, widgetGVK, hooks.CreatePhysical,
		[]byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":3}}`))
	if got := lookup(obj, "metadata", "labels", "marked"); got != "true" {
		t.Errorf("custom resource label marked = %v, want true", got)
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(reg *engine.Registry)
		cfg   *config.Config
		want  string
	}{
		{
			name: "a name already registered by main is an error",
			setup: func(reg *engine.Registry) {
				reg.MustRegister(hooks.NewFunc(config.DefaultHookName, &corev1.Pod{}, []hooks.HookType{hooks.GetVirtual},
					builtin.LabelsFunc(builtin.Labels{})))
			},
			cfg:  config.Default(),
			want: `hooks[0].resources[0]: register hook "default-labels"`,
		},
		{
			name: "a config built in Go is validated",
			cfg: &config.Config{Hooks: []config.Hook{{
				Resources: []config.Resource{{APIVersion: "v1", Kind: "Pod"}},
				Types:     []hooks.HookType{"Nope"},
				Labels:    &builtin.Labels{Labels: map[string]string{"a": "b"}},
			}}},
			want: `hooks[0].types[0]: Invalid value: unknown hook type "Nope"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := engine.NewRegistry(nil)
			if tt.setup != nil {
				tt.setup(reg)
			}
			err := tt.cfg.Build(reg)
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Build error = %v, want one wrapping ErrInvalid and containing %q", err, tt.want)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	parsed, err := config.Parse([]byte(defaultYAML))
	if err != nil {
		t.Fatalf("Parse of the documented default: %v", err)
	}
	if !reflect.DeepEqual(parsed, config.Default()) {
		t.Errorf("documented default = %+v\nDefault() = %+v", parsed, config.Default())
	}
	if err := config.Default().Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	reg := engine.NewRegistry(nil)
	if err := config.Default().Build(reg); err != nil {
		t.Fatalf("Build: %v", err)
	}
	for _, typ := range []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical} {
		obj := run(t, reg, podGVK, typ, podJSON(t, "any", nil))
		if got := lookup(obj, "metadata", "labels", config.DefaultLabel); got != "true" {
			t.Errorf("%s: label %s = %v, want true", typ, config.DefaultLabel, got)
		}
	}
	if reg.Has(podGVK, hooks.GetPhysical) {
		t.Errorf("default hooks GetPhysical; want only CreatePhysical and UpdatePhysical")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(exampleYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("hoks: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	envWith := func(v string) func(string) string {
		return func(k string) string {
			if k == config.EnvVar {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name      string
		path      string
		env       func(string) string
		wantSrc   config.Source
		wantHooks int
		wantErr   string
		invalid   bool
	}{
		{
			name: "a file wins over the environment", path: good, env: envWith(defaultYAML),
			wantSrc: config.Source{Kind: config.SourceFile, Name: good}, wantHooks: 2,
		},
		{
			name: "the environment variable is used without a file", env: envWith(exampleYAML),
			wantSrc: config.Source{Kind: config.SourceEnv, Name: config.EnvVar}, wantHooks: 2,
		},
		{
			name: "neither gives the default", env: envWith(""),
			wantSrc: config.Source{Kind: config.SourceDefault}, wantHooks: 1,
		},
		{
			name: "an environment variable of white space gives the default", env: envWith(" \n"),
			wantSrc: config.Source{Kind: config.SourceDefault}, wantHooks: 1,
		},
		{
			name: "a bad file is invalid and names the file", path: bad,
			wantSrc: config.Source{Kind: config.SourceFile, Name: bad},
			wantErr: `config file "` + bad + `": invalid synchook config: unknown field "hoks"`, invalid: true,
		},
		{
			name: "a bad environment variable is invalid and names the variable", env: envWith("hooks: [{}]"),
			wantSrc: config.Source{Kind: config.SourceEnv, Name: config.EnvVar},
			wantErr: "config env SYNCHOOK_CONFIG: invalid synchook config", invalid: true,
		},
		{
			name: "a missing file is an error but not an invalid config", path: filepath.Join(dir, "missing.yaml"),
			wantSrc: config.Source{Kind: config.SourceFile, Name: filepath.Join(dir, "missing.yaml")},
			wantErr: "missing.yaml",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, src, err := config.Load(tt.path, tt.env)
			if src != tt.wantSrc {
				t.Errorf("source = %v, want %v", src, tt.wantSrc)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				if errors.Is(err, config.ErrInvalid) != tt.invalid {
					t.Errorf("errors.Is(err, ErrInvalid) = %v, want %v", !tt.invalid, tt.invalid)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if len(c.Hooks) != tt.wantHooks {
				t.Errorf("hooks = %d, want %d", len(c.Hooks), tt.wantHooks)
			}
		})
	}
}

func TestSourceString(t *testing.T) {
	tests := []struct {
		name string
		src  config.Source
		want string
	}{
		{name: "a file is quoted", src: config.Source{Kind: config.SourceFile, Name: "/etc/c.yaml"}, want: `file "/etc/c.yaml"`},
		{name: "the environment names the variable", src: config.Source{Kind: config.SourceEnv, Name: config.EnvVar}, want: "env SYNCHOOK_CONFIG"},
		{name: "the default says so", src: config.Source{Kind: config.SourceDefault}, want: "built-in default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.src.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestUndoFalseKeepsTheChangeVisible(t *testing.T) {
	cfg, err := config.Parse([]byte(`
hooks:
  - name: visible
    resources: [{apiVersion: v1, kind: Pod}]
    types: [CreatePhysical]
    undo: false
    labels: {labels: {tenant: a}}
  - name: hidden
    resources: [{apiVersion: v1, kind: Service}]
    types: [CreatePhysical]
    labels: {labels: {tenant: a}}
`))
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true})
	if err := cfg.Build(reg); err != nil {
		t.Fatal(err)
	}
	pod, svc := corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithKind("Service")
	if reg.Has(pod, hooks.GetPhysical) || !reg.Has(svc, hooks.GetPhysical) {
		t.Errorf("Has(Pod, GetPhysical) = %v, Has(Service, GetPhysical) = %v; want false, true", reg.Has(pod, hooks.GetPhysical), reg.Has(svc, hooks.GetPhysical))
	}
	res, err := reg.Mutate(t.Context(), pod, hooks.CreatePhysical, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`))
	if err != nil || strings.Contains(string(res.Patch), "undo") || !strings.Contains(string(res.Patch), "tenant") {
		t.Errorf("undo: false patch %s, %v; want the label and no undo", res.Patch, err)
	}
}

// bindingLine starts a hook entry's bindings: with one binding whose spec follows.
const bindingLine = "    bindings: [{apiVersion: admissionregistration.k8s.io/v1, kind: MutatingAdmissionPolicyBinding, metadata: {name: b}, spec: "

func TestPolicyHooksRunMutatingAdmissionPolicies(t *testing.T) {
	inline := `
hooks:
  - name: node-pool
    types: [CreatePhysical]
    namespaces: [team-a]
    policy:
      apiVersion: admissionregistration.k8s.io/v1
      kind: MutatingAdmissionPolicy
      metadata: {name: node-pool}
      spec:
        matchConstraints:
          resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
        reinvocationPolicy: Never
        mutations:
          - patchType: JSONPatch
            jsonPatch:
              expression: "[JSONPatch{op: 'add', path: '/spec/nodeSelector', value: {'pool': 'tenants'}}]"
  - name: from-file
    types: [CreatePhysical]
    policyFile: ../examples/policies/label-from-variable.yaml
`
	// An inline config has no directory: its policyFile must be absolute.
	abs, err := filepath.Abs("../examples/policies/label-from-variable.yaml")
	if err != nil {
		t.Fatal(err)
	}
	inline = strings.Replace(inline, "../examples/policies/label-from-variable.yaml", abs, 1)
	cfg, err := config.Parse([]byte(inline))
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry(nil)
	if err := cfg.Build(reg); err != nil {
		t.Fatal(err)
	}
	pod := corev1.SchemeGroupVersion.WithKind("Pod")
	for _, tc := range []struct {
		name, raw string
		want      []string
		notWant   string
	}{
		{"a pod in the bound namespace gets the node selector", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"team-a"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, []string{`/spec/nodeSelector`}, ""},
		{"a pod elsewhere does not: namespaces acts as the binding", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"other"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, nil, `/spec/nodeSelector`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := reg.Mutate(t.Context(), pod, hooks.CreatePhysical, []byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(res.Patch), w) {
					t.Errorf("patch %s lacks %s", res.Patch, w)
				}
			}
			if tc.notWant != "" && strings.Contains(string(res.Patch), tc.notWant) {
				t.Errorf("patch %s has %s", res.Patch, tc.notWant)
			}
		})
	}
	for _, tc := range []struct{ name, config, want string }{
		{"a type the rules do not allow is named", strings.Replace(inline, "types: [CreatePhysical]\n    namespaces", "types: [UpdatePhysical]\n    namespaces", 1), "hooks[0].types[0]"},
		{"a CEL compile error names the hook and the expression", strings.Replace(inline, "value: {'pool': 'tenants'}}]", "value: object.nope(}]", 1), "hooks[0].policy: Invalid value: invalid MutatingAdmissionPolicy \"node-pool\": spec.mutations[0].jsonPatch.expression"},
		{"a binding naming no configured policy is named", strings.Replace(inline, "  - name: from-file", bindingLine+"{policyName: other}}]\n  - name: from-file", 1), `hooks[0].policy: Invalid value: invalid MutatingAdmissionPolicy "node-pool": bindings[0].spec.policyName: Invalid value: "other": names no configured policy`},
		{"a paramRef without paramKind is named", strings.Replace(inline, "  - name: from-file", bindingLine+"{policyName: node-pool, paramRef: {name: p}}}]\n  - name: from-file", 1), "bindings[0].spec.paramRef: Forbidden: the policy has no spec.paramKind"},
		{"a binding of another kind is named", strings.Replace(inline, "  - name: from-file", strings.Replace(bindingLine, "kind: MutatingAdmissionPolicyBinding", "kind: ValidatingAdmissionPolicyBinding", 1)+"{policyName: node-pool}}]\n  - name: from-file", 1), "bindings[0]: invalid MutatingAdmissionPolicy: apiVersion \"admissionregistration.k8s.io/v1\", kind \"ValidatingAdmissionPolicyBinding\""},
		{"a param without a name is named", strings.Replace(inline, "  - name: from-file", "    params: [{apiVersion: v1, kind: ConfigMap, data: {a: b}}]\n  - name: from-file", 1), "params[0]: invalid MutatingAdmissionPolicy: metadata.name: Required value"},
		{"bindings on an entry without a policy are refused", strings.Replace(inline, "    policyFile: "+abs, "    policyFile: "+abs+"\n  - name: labels\n    types: [CreatePhysical]\n    resources: [{apiVersion: v1, kind: Pod}]\n    labels: {labels: {a: b}}\n    params: []", 1), "hooks[2]: Forbidden: bindings, params, bindingsFile and paramsFile are only for a policy or policyFile entry"},
		{"reinvocation is refused", strings.Replace(inline, "reinvocationPolicy: Never\n        mutations:\n          - patchType: JSONPatch\n            jsonPatch:\n              expression: \"[JSONPatch{op: 'add', path: '/spec/nodeSelector'", "reinvocationPolicy: IfNeeded\n        mutations:\n          - patchType: JSONPatch\n            jsonPatch:\n              expression: \"[JSONPatch{op: 'add', path: '/spec/nodeSelector'", 1), "spec.reinvocationPolicy"},
		{"an unknown field of the policy is named", strings.Replace(inline, "reinvocationPolicy: Never\n        mutations:\n          - patchType: JSONPatch\n            jsonPatch:\n              expression: \"[JSONPatch{op: 'add', path: '/spec/nodeSelector'", "reinvocationPolicy: Never\n        mutatoins: []\n        mutations:\n          - patchType: JSONPatch\n            jsonPatch:\n              expression: \"[JSONPatch{op: 'add', path: '/spec/nodeSelector'", 1), `spec.mutatoins`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.config))
			if err == nil {
				err = cfg.Build(engine.NewRegistry(nil))
			}
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrInvalid naming %s", err, tc.want)
			}
		})
	}
}
