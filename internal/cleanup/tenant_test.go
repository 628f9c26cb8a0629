package cleanup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/synchook/synchook/internal/cleanup"
	"github.com/synchook/synchook/internal/testenv"
	"github.com/synchook/synchook/internal/undo"
)

// forgedPath is an undo path a tenant would like printed as it is: a newline that starts a
// forged report line, and an ANSI sequence that clears the terminal.
const forgedPath = "/x\nFAILED forged line\x1b[2J"

// sealed returns the sealed undo value of entries for the v1 object kind ns/name on the host,
// as synchook would have written it with ring.
func sealed(t *testing.T, ring *undo.Ring, kind, ns, name string, entries ...undo.Entry) string {
	t.Helper()
	v, err := ring.Seal(undo.Identity{APIVersion: "v1", Kind: kind, Namespace: ns, Name: name}, undo.Physical, undo.Record{Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// configMap returns a host ConfigMap ns/name with labels and annotations, and data k=v.
func configMap(t *testing.T, ns, name string, labels, annotations map[string]string) string {
	t.Helper()
	doc, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels, "annotations": annotations},
		"data":     map[string]string{"k": "v"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// clearUndo returns the clear-text undo value of entries (a JSON array of them), as builds
// before the one rule wrote it and as a tenant can.
func clearUndo(t *testing.T, entries ...undo.Entry) string {
	t.Helper()
	v, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// raw returns v as a JSON value.
func raw(v string) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// The labels and annotations vcluster's syncer puts on a host object: what a tenant's
// clear-text undo would like to rewrite.
var syncerLabels = map[string]string{
	"vcluster.loft.sh/managed-by": "my-vcluster",
	"vcluster.loft.sh/namespace":  "team-a",
}

var syncerAnnotations = map[string]string{
	"vcluster.loft.sh/object-name":      "settings",
	"vcluster.loft.sh/object-namespace": "team-a",
}

// with returns a copy of m with the pairs kv added.
func with(m map[string]string, kv ...string) map[string]string {
	out := maps.Clone(m)
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestCleanupOfTenantAndRefusedUndos(t *testing.T) {
	env := testenv.Start(t)
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	ring, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ring.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "keys")
	if err := os.WriteFile(keyFile, keys, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		// objects returns the host objects of namespace ns.
		objects func(ns string) []string
		// wantCode is the exit code of the first run (a second run always exits 0 or 1 the
		// same way minus what the first run cleaned: see below).
		wantCode int
		// want are lines (or parts of lines) the first run prints; notWant must not appear.
		want, notWant []string
		// check checks the objects after the first run.
		check func(t *testing.T, objs map[string]*unstructured.Unstructured)
	}{
		{
			name: "a sealed undo that opens is applied and the run exits 0",
			objects: func(ns string) []string {
				return []string{configMap(t, ns, "hooked", with(syncerLabels, "tenant", "a"), with(syncerAnnotations,
					undo.Annotation, sealed(t, ring, "ConfigMap", ns, "hooked", undo.Entry{Path: "/metadata/labels/tenant", Hooked: raw("a")}),
					undo.ProvenanceAnnotation, "labels@v1#00000000"))}
			},
			wantCode: 0,
			want:     []string{"cleaned 1/1 v1/ConfigMap", "1 object seen: 1 cleaned, 1 undo applied, 0 entries left unrestored, 0 undos not applied, 0 objects refused"},
			notWant:  []string{"undo not applied"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				if got := objs["ConfigMap/hooked"].GetLabels(); !maps.Equal(got, syncerLabels) {
					t.Errorf("labels %v, want the hook's label removed: %v", got, syncerLabels)
				}
			},
		},
		{
			name: "a clear-text undo on a ConfigMap is listed and never applied, its annotations removed",
			objects: func(ns string) []string {
				forged := clearUndo(t,
					undo.Entry{Path: "/metadata/labels/vcluster.loft.sh~1managed-by", Hooked: raw("my-vcluster"), Original: raw("someone-else")},
					undo.Entry{Path: "/metadata/labels/vcluster.loft.sh~1namespace", Hooked: raw("team-a")},
					undo.Entry{Path: "/metadata/annotations/vcluster.loft.sh~1object-name", Hooked: raw("settings"), Original: raw("kube-root-ca.crt")},
					undo.Entry{Path: "/metadata/annotations/vcluster.loft.sh~1object-namespace", Hooked: raw("team-a"), Original: raw("kube-system")},
				)
				return []string{configMap(t, ns, "settings", syncerLabels, with(syncerAnnotations,
					undo.Annotation, forged, undo.ProvenanceAnnotation, "labels@v1#00000000"))}
			},
			wantCode: 1,
			want: []string{
				"cleaned 1/1 v1/ConfigMap", "undo not applied (clear_text)",
				"1 cleaned, 0 undos applied, 0 entries left unrestored, 1 undo not applied, 0 objects refused",
			},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				cm := objs["ConfigMap/settings"]
				if got := cm.GetLabels(); !maps.Equal(got, syncerLabels) {
					t.Errorf("labels %v, want the syncer's unchanged: %v", got, syncerLabels)
				}
				if got := cm.GetAnnotations(); !maps.Equal(got, syncerAnnotations) {
					t.Errorf("annotations %v, want the syncer's unchanged and no synchook.io/*: %v", got, syncerAnnotations)
				}
			},
		},
		{
			name: "an object the apiserver refuses restored loses only its annotations and the run goes on",
			objects: func(ns string) []string {
				return []string{
					configMap(t, ns, "a-refused", with(syncerLabels, "x", "a"), with(syncerAnnotations,
						undo.Annotation, sealed(t, ring, "ConfigMap", ns, "a-refused",
							undo.Entry{Path: "/metadata/labels/x", Hooked: raw("a"), Original: raw("-bad value-")}),
						undo.ProvenanceAnnotation, "labels@v1#00000000")),
					configMap(t, ns, "b-after", with(syncerLabels, "y", "hooked"), with(syncerAnnotations,
						undo.Annotation, sealed(t, ring, "ConfigMap", ns, "b-after",
							undo.Entry{Path: "/metadata/labels/y", Hooked: raw("hooked"), Original: raw("original")}))),
				}
			},
			wantCode: 1,
			want: []string{
				`refused 1/2 v1/ConfigMap`, `the apiserver refused the restored object: Invalid (422); "metadata.labels": FieldValueInvalid`,
				"undo not applied (refused): only synchook's annotations were removed",
				"cleaned 2/2 v1/ConfigMap",
				"2 objects seen: 2 cleaned, 1 undo applied, 0 entries left unrestored, 0 undos not applied, 1 object refused (annotations removed only), 0 unchanged, 0 failed",
			},
			notWant: []string{"bad value", "FAILED"},
			check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
				if got := objs["ConfigMap/a-refused"].GetLabels(); !maps.Equal(got, with(syncerLabels, "x", "a")) {
					t.Errorf("refused object's labels %v, want them as they were", got)
				}
				if got := objs["ConfigMap/a-refused"].GetAnnotations(); !maps.Equal(got, syncerAnnotations) {
					t.Errorf("refused object's annotations %v, want only synchook's removed", got)
				}
				if got := objs["ConfigMap/b-after"].GetLabels(); !maps.Equal(got, with(syncerLabels, "y", "original")) {
					t.Errorf("the next object's labels %v, want its undo applied", got)
				}
			},
		},
		{
			name: "an undo path holding a newline and an escape sequence is printed quoted",
			objects: func(ns string) []string {
				return []string{configMap(t, ns, "quoted", syncerLabels, with(syncerAnnotations,
					undo.Annotation, sealed(t, ring, "ConfigMap", ns, "quoted", undo.Entry{Path: forgedPath, Hooked: raw("h"), Original: raw("o")})))}
			},
			wantCode: 1,
			want: []string{
				`  not restorable (an update cannot change it back): "/x\nFAILED forged line\x1b[2J"`,
				"1 undo applied, 1 entry left unrestored",
			},
			notWant: []string{"\x1b", "\nFAILED forged line"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "vc-" + strings.ToLower(strings.NewReplacer(" ", "-", "'", "").Replace(tc.name))
			if len(ns) > 63 {
				ns = strings.TrimRight(ns[:63], "-")
			}
			createNamespace(t, c, ns)
			for _, doc := range tc.objects(ns) {
				create(t, c, doc)
			}
			code, out := runCLI(t, "--kubeconfig", kubeconfig, "--namespace", ns, "--undo-key-file", keyFile, "--kinds", "v1/ConfigMap")
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d:\n%s", code, tc.wantCode, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out, w) {
					t.Errorf("output holds %q:\n%s", w, out)
				}
			}
			if left := reservedAnnotations(t, c, ns); len(left) > 0 {
				t.Errorf("synchook annotations left: %v", left)
			}
			if tc.check != nil {
				tc.check(t, objects(t, c, ns))
			}
			// Whatever was left, the run finished: a second one finds nothing to do.
			if code, out := runCLI(t, "--kubeconfig", kubeconfig, "--namespace", ns, "--undo-key-file", keyFile, "--kinds", "v1/ConfigMap"); code != 0 || !strings.Contains(out, " 0 cleaned") {
				t.Errorf("second run: exit %d, want 0 with nothing cleaned:\n%s", code, out)
			}
		})
	}

	t.Run("an object whose update fails is counted and the run goes on", func(t *testing.T) {
		const ns = "vc-update-fails"
		createNamespace(t, c, ns)
		for _, name := range []string{"a-forbidden", "b-fine"} {
			create(t, c, configMap(t, ns, name, syncerLabels, map[string]string{undo.ProvenanceAnnotation: "labels@v1#00000000"}))
		}
		denying := interceptor.NewClient(mustWithWatch(t, env.Config), interceptor.Funcs{
			Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if obj.GetName() == "a-forbidden" {
					return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, obj.GetName(), fmt.Errorf("denied by policy"))
				}
				return cl.Update(ctx, obj, opts...)
			},
		})
		var progress bytes.Buffer
		sum, err := cleanup.Run(t.Context(), cleanup.Options{Client: denying, Namespace: ns, Kinds: []schema.GroupVersionKind{configMapGVK}, Progress: &progress})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Failed != 1 || sum.Cleaned != 1 || sum.OK() {
			t.Errorf("summary %+v (OK %v), want 1 failed, 1 cleaned, not OK:\n%s", sum, sum.OK(), progress.String())
		}
		if !strings.Contains(progress.String(), "FAILED 1/2 v1/ConfigMap vc-update-fails/a-forbidden: update: Forbidden (403)") {
			t.Errorf("progress:\n%s", progress.String())
		}
	})

	t.Run("the fallback after a refusal", func(t *testing.T) {
		badRequest := apierrors.NewBadRequest("cannot decode")
		invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "x", nil)
		for i, tc := range []struct {
			name string
			// update answers the n-th Update (from 1) of the object "a", or passes it on (nil).
			update                               func(ctx context.Context, cl client.WithWatch, obj client.Object, n int) error
			wantRefused, wantFailed, wantUpdates int
			want                                 string
		}{
			{
				name: "a BadRequest is a refusal too",
				update: func(_ context.Context, _ client.WithWatch, _ client.Object, n int) error {
					if n == 1 {
						return badRequest
					}
					return nil
				},
				wantRefused: 1, wantUpdates: 2, want: "refused 1/2 v1/ConfigMap vc-fallback-0/a: the apiserver refused the restored object: BadRequest (400)",
			},
			{
				name: "a conflict during the fallback reads the object again",
				update: func(ctx context.Context, cl client.WithWatch, obj client.Object, n int) error {
					switch n {
					case 1:
						return invalid
					case 2: // someone else writes the object between the fallback's read and update
						cm := &unstructured.Unstructured{}
						cm.SetGroupVersionKind(configMapGVK)
						if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), cm); err != nil {
							return err
						}
						cm.SetLabels(with(cm.GetLabels(), "meanwhile", "yes"))
						return cl.Update(ctx, cm)
					}
					return nil
				},
				wantRefused: 1, wantUpdates: 3, want: "refused 1/2 v1/ConfigMap vc-fallback-1/a",
			},
			{
				name: "a fallback refused too fails the object and the run goes on",
				update: func(context.Context, client.WithWatch, client.Object, int) error {
					return invalid
				},
				wantFailed: 1, wantUpdates: 2, want: "FAILED 1/2 v1/ConfigMap vc-fallback-2/a: the apiserver refused the restored object (Invalid (422)), and removing only synchook's annotations: update: Invalid (422)",
			},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ns := fmt.Sprintf("vc-fallback-%d", i)
				createNamespace(t, c, ns)
				for _, name := range []string{"a", "b"} {
					create(t, c, configMap(t, ns, name, with(syncerLabels, "x", "hooked"), with(syncerAnnotations,
						undo.Annotation, sealed(t, ring, "ConfigMap", ns, name, undo.Entry{Path: "/metadata/labels/x", Hooked: raw("hooked"), Original: raw("original")}))))
				}
				updates := 0
				cl := interceptor.NewClient(mustWithWatch(t, env.Config), interceptor.Funcs{
					Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
						if obj.GetName() == "a" {
							updates++
							if err := tc.update(ctx, cl, obj, updates); err != nil {
								return err
							}
						}
						return cl.Update(ctx, obj, opts...)
					},
				})
				var progress bytes.Buffer
				sum, err := cleanup.Run(t.Context(), cleanup.Options{Client: cl, Namespace: ns, Kinds: []schema.GroupVersionKind{configMapGVK}, Ring: ring, Progress: &progress})
				if err != nil {
					t.Fatal(err)
				}
				if sum.Refused != tc.wantRefused || sum.Failed != tc.wantFailed || sum.Cleaned != 2-tc.wantFailed || updates != tc.wantUpdates {
					t.Errorf("summary %+v after %d updates of a, want %d refused, %d failed, %d cleaned after %d:\n%s",
						sum, updates, tc.wantRefused, tc.wantFailed, 2-tc.wantFailed, tc.wantUpdates, progress.String())
				}
				if !strings.Contains(progress.String(), tc.want) || !strings.Contains(progress.String(), "cleaned 2/2 v1/ConfigMap "+ns+"/b") {
					t.Errorf("progress lacks %q or b cleaned:\n%s", tc.want, progress.String())
				}
				objs := objects(t, c, ns)
				if got := objs["ConfigMap/b"].GetLabels()["x"]; got != "original" {
					t.Errorf("b's label x=%q, want its undo applied", got)
				}
				a := objs["ConfigMap/a"]
				_, hasUndo := a.GetAnnotations()[undo.Annotation]
				if hasUndo != (tc.wantFailed > 0) || a.GetLabels()["x"] != "hooked" {
					t.Errorf("a: undo annotation %v, label x=%q; want the undo gone unless it failed, the hook's label kept", hasUndo, a.GetLabels()["x"])
				}
			})
		}
	})

	t.Run("exit codes", func(t *testing.T) {
		unreachable := filepath.Join(dir, "unreachable")
		if err := os.WriteFile(unreachable, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:%d"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {}}]
current-context: c
`, testenv.FreePort(t)), 0o600); err != nil {
			t.Fatal(err)
		}
		badKeys := filepath.Join(dir, "bad-keys")
		if err := os.WriteFile(badKeys, []byte("not a key\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			args []string
			code int
			want string
		}{
			{"a kubeconfig that does not exist is a configuration error", []string{"--kubeconfig", filepath.Join(dir, "none"), "--namespace", "x"}, 2, "kubeconfig"},
			{"a key file that does not parse is a configuration error", []string{"--kubeconfig", kubeconfig, "--namespace", "x", "--undo-key-file", badKeys}, 2, "--undo-key-file"},
			{"an unreachable cluster means the run could not finish", []string{"--kubeconfig", unreachable, "--namespace", "x"}, 3, "nothing was cleaned"},
			{"a namespace without synchook annotations exits 0", []string{"--kubeconfig", kubeconfig, "--namespace", "vc-empty"}, 0, "0 objects seen"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, out := runCLI(t, tc.args...)
				if code != tc.code || !strings.Contains(out, tc.want) {
					t.Errorf("exit %d, want %d with %q:\n%s", code, tc.code, tc.want, out)
				}
			})
		}
	})
}

// mustWithWatch returns a client of cfg.
func mustWithWatch(t *testing.T, cfg *rest.Config) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
