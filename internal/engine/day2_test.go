package engine_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/builtin"
	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/failure"
	"github.com/synchook/synchook/internal/undo"
)

// labelsRegistry is a registry with a labels hook team=value on Pods' CreatePhysical and
// UpdatePhysical, keyed by keys (nil: no key).
func labelsRegistry(keys *undo.Keeper, value string) *engine.Registry {
	return labelsRegistryOn(keys, value, hooks.CreatePhysical, hooks.UpdatePhysical)
}

// labelsRegistryOn is labelsRegistry with the hook on the hook types types.
func labelsRegistryOn(keys *undo.Keeper, value string, types ...hooks.HookType) *engine.Registry {
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
	l := builtin.Labels{Labels: map[string]string{"team": value}}
	reg.MustRegister(hooks.NewMetadataFunc("labels", &corev1.Pod{}, types, builtin.LabelsFunc(l), builtin.LabelsMetadataFunc(l)))
	return reg
}

// tolerationHook adds a toleration on Pods' CreatePhysical and UpdatePhysical (a field an
// update cannot remove again).
func tolerationHook() hooks.ClientHook {
	return hooks.NewFunc("toleration", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
		p := o.(*corev1.Pod)
		for _, t := range p.Spec.Tolerations {
			if t.Key == "tenant" {
				return p, nil
			}
		}
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "tenant", Operator: corev1.TolerationOpExists})
		return p, nil
	})
}

func podJSON(t *testing.T, labels map[string]string) []byte {
	t.Helper()
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	p.APIVersion, p.Kind = "v1", "Pod"
	b, err := json.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodePod(t *testing.T, doc []byte) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal(doc, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// noTrace fails when the view carries a synchook.io/* annotation or the label team.
func noTrace(t *testing.T, what string, view []byte) {
	t.Helper()
	p := decodePod(t, view)
	for k := range p.Annotations {
		if strings.HasPrefix(k, "synchook.io/") {
			t.Errorf("%s: the view carries %s: %s", what, k, view)
		}
	}
	if _, ok := p.Labels["team"]; ok {
		t.Errorf("%s: the view carries the hook's label: %s", what, view)
	}
}

// noHookLabel fails when the view carries the label team.
func noHookLabel(t *testing.T, what string, view []byte) {
	t.Helper()
	if _, ok := decodePod(t, view).Labels["team"]; ok {
		t.Errorf("%s: the view carries the hook's label: %s", what, view)
	}
}

func TestTenConfigChangesKeepTheUndoSmallAndTheTenantViewClean(t *testing.T) {
	keys := testKeeper(t)
	stored := mutatedOK(t, labelsRegistry(keys, "v0"), hooks.CreatePhysical, podJSON(t, map[string]string{"app": "web"}))
	for i := 1; i <= 10; i++ {
		value := "v" + strings.Repeat("x", i)
		reg := labelsRegistry(keys, value) // the config changed: a new value
		view := mutatedOK(t, reg, hooks.GetPhysical, stored)
		noTrace(t, "view after a config change", view)
		// The tenant's update: vcluster PUTs the view plus the change.
		p := decodePod(t, view)
		p.Labels["rev"] = value
		next, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		stored = mutatedOK(t, reg, hooks.UpdatePhysical, next)
		sp := decodePod(t, stored)
		if sp.Labels["team"] != value || sp.Labels["rev"] != value {
			t.Fatalf("change %d: host labels %v, want team and rev %s", i, sp.Labels, value)
		}
		if n := len(sp.Annotations[undo.Annotation]); n == 0 || n > 2048 {
			t.Fatalf("change %d: host undo is %d bytes, want 1..2048", i, n)
		}
		if strings.Count(sp.Annotations[undo.Annotation], "s2.") != 1 {
			t.Fatalf("change %d: the undo nests an older one", i)
		}
	}
}

func TestAClearTextUndoOfAnEarlierBuildIsTheTenantsAndIsNeverApplied(t *testing.T) {
	// What an object written by a build before the one rule shows after the upgrade: its
	// clear-text undo is not applied (the view shows the old hook's label and the annotation),
	// and the next write records it as the tenant's annotation (so the view still gives back
	// what the syncer sent), never as entries.
	reg := labelsRegistry(testKeeper(t), "v1")
	old := podJSON(t, map[string]string{"app": "web", "team": "v0"})
	p := decodePod(t, old)
	p.Annotations = map[string]string{undo.Annotation: `[{"path":"/metadata/labels/team","hooked":"v0"}]`}
	stored, _ := json.Marshal(p)
	view := mutatedOK(t, reg, hooks.GetPhysical, stored)
	if vp := decodePod(t, view); vp.Labels["team"] != "v0" || vp.Annotations[undo.Annotation] == "" {
		t.Fatalf("the view applied a clear-text undo: %s", view)
	}
	next := mutatedOK(t, reg, hooks.UpdatePhysical, view)
	back := mutatedOK(t, reg, hooks.GetPhysical, next)
	if string(canonical(t, back)) != string(canonical(t, view)) {
		t.Errorf("the read after the write is not what the syncer sent:\n%s\nwant\n%s", back, view)
	}
}

func TestARemovedHookLeavesNoTraceAndNothingAnUpdateCannotChangeBack(t *testing.T) {
	keys := testKeeper(t)
	reg := labelsRegistry(keys, "a")
	reg.MustRegister(tolerationHook())
	stored := mutatedOK(t, reg, hooks.CreatePhysical, podJSON(t, map[string]string{"app": "web"}))

	// Both hooks removed; synchook still covers the kind it sealed an undo on.
	removed := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
	removed.CoverUndoReads(keys.SealedKinds())
	view := mutatedOK(t, removed, hooks.GetPhysical, stored)
	noHookLabel(t, "view after the hooks were removed", view)
	if tol := decodePod(t, view).Spec.Tolerations; len(tol) != 1 {
		t.Errorf("tolerations in the view %v: want the hook's toleration kept (an update cannot remove it)", tol)
	}
	// The toleration stays recorded (Kept) on the view, so that no write loses it and
	// synchook cleanup can list it.
	if res, err := cleanupRule(keys).Cleanup(t.Context(), podGVK, undo.Physical, view); err != nil || strings.Join(res.Unrestored, ",") != "/spec/tolerations" {
		t.Errorf("cleanup of the view: %+v, %v; want /spec/tolerations listed", res, err)
	}

	// Only the labels hook removed: the toleration hook still puts its toleration back, so
	// the view may leave it out... but the fingerprint of the writer chain changed: only what
	// an update can change back is taken off.
	onlyTol := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
	onlyTol.MustRegister(tolerationHook())
	view = mutatedOK(t, onlyTol, hooks.GetPhysical, stored)
	noHookLabel(t, "view with the labels hook removed", view)
	// The tenant's update of that view: the toleration hook changes nothing (its toleration
	// is there), and the carried entry is recorded again, not lost.
	p := decodePod(t, view)
	p.Labels["rev"] = "1"
	next, _ := json.Marshal(p)
	again := mutatedOK(t, onlyTol, hooks.UpdatePhysical, next)
	if res, err := cleanupRule(keys).Cleanup(t.Context(), podGVK, undo.Physical, again); err != nil || strings.Join(res.Unrestored, ",") != "/spec/tolerations" {
		t.Errorf("cleanup after the update: %+v, %v; want /spec/tolerations still listed", res, err)
	}
	if u := decodePod(t, again).Annotations[undo.Annotation]; strings.Count(u, "s2.") != 1 {
		t.Errorf("the undo after the update: %.40q", u)
	}
	if v2 := mutatedOK(t, onlyTol, hooks.GetPhysical, again); decodePod(t, v2).Labels["rev"] != "1" {
		t.Error("the read after the update lost the tenant's label")
	}

	// The same config: everything is taken off, the toleration too.
	same := labelsRegistry(keys, "a")
	same.MustRegister(tolerationHook())
	view = mutatedOK(t, same, hooks.GetPhysical, stored)
	if tol := decodePod(t, view).Spec.Tolerations; len(tol) != 0 {
		t.Errorf("tolerations in the view with the same config %v, want none", tol)
	}
}

func TestAnUpgradedGoHookWhoseOutputDiffersStillLeavesNoTrace(t *testing.T) {
	keys := testKeeper(t)
	hook := func(value string) hooks.ClientHook {
		return hooks.NewFunc("team", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
			l := o.GetLabels()
			l["team"] = value
			o.SetLabels(l)
			return o, nil
		})
	}
	v1 := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys, Version: "v1"})
	v1.MustRegister(hook("a"))
	v2 := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys, Version: "v2"})
	v2.MustRegister(hook("b"))
	stored := mutatedOK(t, v1, hooks.CreatePhysical, podJSON(t, map[string]string{"app": "web"}))
	noTrace(t, "view of the upgraded build", mutatedOK(t, v2, hooks.GetPhysical, stored))
}

func TestASecretStripStoresNoFormOfTheValue(t *testing.T) {
	const value = "s3cr3t-canary-value"
	strip, err := builtin.StripFunc(builtin.Strip{Paths: []string{"/data/password"}})
	if err != nil {
		t.Fatal(err)
	}
	newReg := func(keys *undo.Keeper) *engine.Registry {
		reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
		reg.MustRegister(hooks.NewFunc("strip", &corev1.Secret{}, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, strip))
		return reg
	}
	secret := []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"ns"},"data":{"password":"` + base64.StdEncoding.EncodeToString([]byte(value)) + `","user":"YWRtaW4="}}`)
	gvk := corev1.SchemeGroupVersion.WithKind("Secret")

	t.Run("with a key the undo is sealed and the read gives the value back", func(t *testing.T) {
		reg := newReg(testKeeper(t))
		res, err := reg.Mutate(t.Context(), gvk, hooks.CreatePhysical, secret)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := res.Object()
		if err != nil {
			t.Fatal(err)
		}
		for _, form := range []string{value, base64.StdEncoding.EncodeToString([]byte(value)), base64.RawStdEncoding.EncodeToString([]byte(value)), hex.EncodeToString([]byte(value))} {
			if strings.Contains(string(stored), form) || strings.Contains(string(res.Patch), form) {
				t.Fatalf("the host Secret holds a form of the value (%d bytes)", len(form))
			}
		}
		back, err := reg.Mutate(t.Context(), gvk, hooks.GetPhysical, stored)
		if err != nil {
			t.Fatal(err)
		}
		view, err := back.Object()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(view), base64.StdEncoding.EncodeToString([]byte(value))) || strings.Contains(string(view), "synchook.io/") {
			t.Error("the view lacks the value or carries a synchook annotation")
		}
	})
	t.Run("without a key the change is refused with an error that names the cause", func(t *testing.T) {
		_, err := newReg(nil).Mutate(t.Context(), gvk, hooks.CreatePhysical, secret)
		if !errors.Is(err, undo.ErrNeedsKey) || !strings.Contains(err.Error(), "undo key") {
			t.Fatalf("error %v, want undo.ErrNeedsKey naming the undo key", err)
		}
		if f, _ := failure.Classify(err); f != failure.Protected {
			t.Errorf("failure %v, want Protected (422)", f)
		}
		if strings.Contains(err.Error(), value) || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte(value))) {
			t.Error("the error holds the value")
		}
	})
}

func TestACreateOnlyHookNeverAppliesATenantsUndo(t *testing.T) {
	createOnly := func(keys *undo.Keeper) *engine.Registry {
		reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
		l := builtin.Labels{Labels: map[string]string{"team": "a"}}
		reg.MustRegister(hooks.NewMetadataFunc("labels", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical}, builtin.LabelsFunc(l), builtin.LabelsMetadataFunc(l)))
		return reg
	}
	// The tenant's update (no UpdatePhysical chain: it reaches the host as written) sets
	// team: b and an undo that would show team: a... or anything else.
	forged := []string{
		`[{"path":"/metadata/labels/team","hooked":"b","original":"a"}]`,
		"s1.00000000.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	}
	for _, keys := range []*undo.Keeper{testKeeper(t)} {
		reg := createOnly(keys)
		for _, f := range forged {
			stored := podWithAnnotation(t, map[string]string{"team": "b"}, f)
			view := mutatedOK(t, reg, hooks.GetPhysical, stored)
			if got := decodePod(t, view).Labels["team"]; got != "b" {
				t.Errorf("key %v, forged %.20s: the view shows team=%q, want b (the forged undo applied)", keys.Ring() != nil, f, got)
			}
		}
	}
}

func TestASealedUndoOpensOnlyOnItsOwnObjectAndIsDeterministic(t *testing.T) {
	keys := testKeeper(t)
	reg := labelsRegistry(keys, "a")
	x := podJSON(t, map[string]string{"app": "web"})
	one := mutatedOK(t, reg, hooks.CreatePhysical, x)
	two := mutatedOK(t, reg, hooks.CreatePhysical, x)
	if string(one) != string(two) {
		t.Fatal("sealing the same object twice gave different bytes: vcluster would write it forever")
	}
	// The same undo copied to a pod of another name does not open there.
	u := decodePod(t, one).Annotations[undo.Annotation]
	other := strings.Replace(string(podWithAnnotation(t, map[string]string{"app": "web", "team": "a"}, u)), `"name":"web"`, `"name":"other"`, 1)
	view := mutatedOK(t, reg, hooks.GetPhysical, []byte(other))
	if decodePod(t, view).Labels["team"] != "a" || decodePod(t, view).Annotations[undo.Annotation] != u {
		t.Errorf("a sealed undo copied to another pod was applied: %s", view)
	}
	// A key it does not know, and a damaged value, never open.
	otherKeys := testKeeper(t)
	view = mutatedOK(t, labelsRegistry(otherKeys, "a"), hooks.GetPhysical, one)
	if decodePod(t, view).Labels["team"] != "a" {
		t.Error("an undo sealed with another key was applied")
	}
}

func podWithAnnotation(t *testing.T, labels map[string]string, undoValue string) []byte {
	t.Helper()
	p := decodePod(t, podJSON(t, labels))
	p.Annotations = map[string]string{undo.Annotation: undoValue}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mutatedOK is mutated that fails the test on an error.
func mutatedOK(t *testing.T, reg *engine.Registry, typ hooks.HookType, doc []byte) []byte {
	t.Helper()
	res, err := reg.Mutate(context.Background(), podGVK, typ, doc)
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	out, err := res.Object()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCleanupListsWhatItCannotRestoreEvenAfterOthersChangedIt(t *testing.T) {
	keys := testKeeper(t)
	reg := labelsRegistry(keys, "a")
	reg.MustRegister(tolerationHook())
	stored := mutatedOK(t, reg, hooks.CreatePhysical, podJSON(t, map[string]string{"app": "web"}))
	// The apiserver's default tolerations join the list the hook created.
	p := decodePod(t, stored)
	p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists})
	stored, _ = json.Marshal(p)

	gone := cleanupRule(keys) // the hooks gone
	res, err := gone.Cleanup(t.Context(), podGVK, undo.Physical, stored)
	if err != nil || res.Object == nil || res.Dropped != "" {
		t.Fatalf("Cleanup: %+v, %v", res, err)
	}
	if strings.Join(res.Unrestored, ",") != "/spec/tolerations" {
		t.Errorf("unrestored %v, want /spec/tolerations", res.Unrestored)
	}
	noTrace(t, "the cleaned object", res.Object)
	if again, err := gone.Cleanup(t.Context(), podGVK, undo.Physical, res.Object); err != nil || again.Object != nil {
		t.Errorf("a second cleanup: %+v, %v; want nothing to do", again, err)
	}
}

// TestAnArrayInsertOrRemoveIsOneUndoEntry: a hook that removes the first of many tolerations
// (or inserts one at the front) records one entry the size of that element, and the read gives
// the array back exactly.
func TestAnArrayInsertOrRemoveIsOneUndoEntry(t *testing.T) {
	for _, n := range []int{1, 10, 1000} {
		for name, edit := range map[string]func(p *corev1.Pod){
			"remove the first": func(p *corev1.Pod) { p.Spec.Tolerations = p.Spec.Tolerations[1:] },
			"insert at the front": func(p *corev1.Pod) {
				p.Spec.Tolerations = append([]corev1.Toleration{{Key: "front", Operator: corev1.TolerationOpExists}}, p.Spec.Tolerations...)
			},
			"remove from the middle": func(p *corev1.Pod) {
				p.Spec.Tolerations = append(p.Spec.Tolerations[:n/2:n/2], p.Spec.Tolerations[n/2+1:]...)
			},
		} {
			for _, keys := range []*undo.Keeper{testKeeper(t)} {
				reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: keys})
				reg.MustRegister(hooks.NewFunc("edit", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical}, func(_ context.Context, o client.Object) (client.Object, error) {
					edit(o.(*corev1.Pod))
					return o, nil
				}))
				p := decodePod(t, podJSON(t, map[string]string{"app": "web"}))
				for i := range n {
					p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "k" + strings.Repeat("x", i%7) + string(rune('a'+i%26)), Value: strings.Repeat("v", 20), Operator: corev1.TolerationOpEqual})
				}
				x, _ := json.Marshal(p)
				res, err := reg.Mutate(t.Context(), podGVK, hooks.CreatePhysical, x)
				if err != nil {
					t.Fatalf("%s of %d: %v", name, n, err)
				}
				if res.Operations > 3 {
					t.Errorf("%s of %d: %d operations, want the element's and the undo's", name, n, res.Operations)
				}
				stored, _ := res.Object()
				if u := decodePod(t, stored).Annotations[undo.Annotation]; len(u) > 600 {
					t.Errorf("%s of %d: an undo of %d bytes, want about one element's", name, n, len(u))
				}
				view := mutatedOK(t, reg, hooks.GetPhysical, stored)
				if got := decodePod(t, view); len(got.Spec.Tolerations) != n || !equalJSON(t, got.Spec.Tolerations, p.Spec.Tolerations) {
					t.Errorf("%s of %d (key %v): the read does not give the tolerations back", name, n, keys != nil)
				}
			}
		}
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestAnAnswerPastTheDeadlineIsNotGiven: a request whose hooks return only after its deadline
// (the work after the hooks — diff, undo, encode — would run past it) is answered
// DeadlineExceeded, a read too, and holds its one slot until it ends.
func TestAnAnswerPastTheDeadlineIsNotGiven(t *testing.T) {
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: testKeeper(t)})
	entered := make(chan struct{}, 1)
	late := func(ctx context.Context, o client.Object) (client.Object, error) {
		entered <- struct{}{}
		<-ctx.Done() // returns, as a well-behaved hook does, but only once the deadline passed
		return o, nil
	}
	reg.MustRegister(hooks.NewFunc("late", &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.GetPhysical}, late))
	for _, typ := range []hooks.HookType{hooks.CreatePhysical, hooks.GetPhysical} {
		r := engine.NewRunner(reg, engine.RunnerOptions{MaxConcurrent: 1}) // the slot of an abandoned run is freed when it returns
		// The deadline passes while the hook runs, never before it starts (a fixed 50 ms could
		// pass during the decode on a loaded machine, and test another path).
		ctx, expire := expireOnSignal(t.Context())
		expireWhenEntered(t.Context(), entered, expire)
		_, err := r.Mutate(ctx, podGVK, typ, podJSON(t, nil))
		if f, _ := failure.Classify(err); !errors.Is(err, context.DeadlineExceeded) || f != failure.Deadline {
			t.Errorf("%s: %v (failure %v), want DeadlineExceeded", typ, err, f)
		}
	}
}

// Regression (issue 25): the labels fast path left "annotations":{} (and "labels":{}) on a pod
// that had none after a write and its read.
func TestARoundTripLeavesNoEmptyMapsBehind(t *testing.T) {
	x := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"ns"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`)
	for _, keys := range []*undo.Keeper{testKeeper(t)} {
		reg := labelsRegistry(keys, "a")
		view := mutatedOK(t, reg, hooks.GetPhysical, mutatedOK(t, reg, hooks.CreatePhysical, x))
		var got, want map[string]any
		_ = json.Unmarshal(view, &got)
		_ = json.Unmarshal(x, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("key %v: the read gives %s, want %s", keys != nil, view, x)
		}
	}
}

// cleanupRule is the rule `synchook cleanup` runs under with keys (internal/cleanup): the
// hooks gone, the default size bound.
func cleanupRule(keys *undo.Keeper) undo.Rule {
	return undo.Rule{Ring: keys.Ring(), MaxBytes: undo.DefaultMaxBytes}
}
