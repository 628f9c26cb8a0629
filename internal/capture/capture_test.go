package capture

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/undo"
)

var (
	podGVK        = corev1.SchemeGroupVersion.WithKind("Pod")
	secretGVK     = corev1.SchemeGroupVersion.WithKind("Secret")
	secretListGVK = corev1.SchemeGroupVersion.WithKind("SecretList")
)

// labelHook adds label key=value to pods on CreatePhysical and UpdatePhysical.
func labelHook(name, key, value string) hooks.ClientHook {
	return hooks.NewFunc(name, &corev1.Pod{}, []hooks.HookType{hooks.CreatePhysical, hooks.UpdatePhysical},
		func(_ context.Context, o client.Object) (client.Object, error) {
			l := o.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l[key] = value
			o.SetLabels(l)
			return o, nil
		})
}

// secretHook copies every data value of a Secret to "<key>-copy" and a stringData "extra"
// (so the patch carries Secret values), and refuses a Secret labelled refuse=yes with an
// error quoting its values (so the error would carry them).
func secretHook() hooks.ClientHook {
	return hooks.NewFunc("secret-copy", &corev1.Secret{}, []hooks.HookType{hooks.CreatePhysical},
		func(_ context.Context, o client.Object) (client.Object, error) {
			s := o.(*corev1.Secret)
			if s.Labels["refuse"] == "yes" {
				return nil, fmt.Errorf("refused, data %q", s.Data)
			}
			for k, v := range s.Data {
				if !strings.HasSuffix(k, "-copy") {
					s.Data[k+"-copy"] = v
				}
			}
			s.Labels = map[string]string{"copied": "true"}
			return s, nil
		})
}

// testRing is the undo key of every registry of these tests: a replay opens what the
// captured run sealed, as `synchook replay --undo-key-file` with the deployed key does.
var testRing = sync.OnceValue(func() *undo.Ring {
	ring, err := undo.GenerateRing()
	if err != nil {
		panic(err)
	}
	return ring
})

func newRegistry(t *testing.T, hs ...hooks.ClientHook) *engine.Registry {
	t.Helper()
	// As deployed: a Secret hook's undo is sealed, and a replay uses the same key.
	reg := engine.NewRegistryWithOptions(engine.RegistryOptions{Undo: true, Keys: undo.NewKeeper(testRing())})
	for _, h := range hs {
		if err := reg.Register(h); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func newWriter(t *testing.T, o Options) *Writer {
	t.Helper()
	if o.Sample == 0 {
		o.Sample = 1
	}
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	go w.Run(context.Background())
	t.Cleanup(func() { w.Close() })
	return w
}

func mutate(t *testing.T, r *engine.Runner, gvk schema.GroupVersionKind, ht hooks.HookType, obj []byte) []byte {
	t.Helper()
	res, err := r.Mutate(context.Background(), gvk, ht, obj)
	if err != nil {
		t.Fatalf("%s %s: %v", ht, gvk.Kind, err)
	}
	out, err := res.Object()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readRecords(t *testing.T, dir string) []*Record {
	t.Helper()
	files, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []*Record
	for _, f := range files {
		rec, err := ReadFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, rec)
	}
	return out
}

func TestCapturedSecretsHoldNoPlaintext(t *testing.T) {
	const canary = "canary-7f3a9c1e-plaintext-value"
	dir := filepath.Join(t.TempDir(), "capture")
	reg := newRegistry(t, secretHook())
	w := newWriter(t, Options{Dir: dir, Registry: reg, Version: "v9.9.9"})
	r := engine.NewRunner(reg, engine.RunnerOptions{Capture: w.Capture})

	secret := fixtures.Secret("default", "db", canary)
	secret.StringData = map[string]string{"extra": canary}
	raw := fixtures.JSON(secret)
	hooked := mutate(t, r, secretGVK, hooks.CreatePhysical, raw)
	if !bytes.Contains(hooked, []byte(base64.StdEncoding.EncodeToString([]byte(canary)))) {
		t.Fatalf("the hook did not copy the value: %s", hooked)
	}
	mutate(t, r, secretGVK, hooks.GetPhysical, hooked) // the undo annotation records the values
	list := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"SecretList","items":[%s]}`, raw)
	mutate(t, r, secretListGVK, hooks.CreatePhysical, list)
	refused := fixtures.Secret("default", "refused", canary)
	refused.Labels = map[string]string{"refuse": "yes"}
	if _, err := r.Mutate(context.Background(), secretGVK, hooks.CreatePhysical, fixtures.JSON(refused)); err == nil {
		t.Fatal("the refusing hook did not fail")
	}
	w.Close()

	info, err := os.Stat(dir)
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v, mode %v; want 0700", err, info.Mode().Perm())
	}
	files, _ := Files(dir)
	if len(files) != 4 {
		t.Fatalf("%d files, want 4", len(files))
	}
	forbidden := []string{canary, base64.StdEncoding.EncodeToString([]byte(canary)), base64.StdEncoding.EncodeToString([]byte(canary))[:20]}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range forbidden {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s contains %q:\n%s", f, s, b)
			}
		}
		if info, _ := os.Stat(f); info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, info.Mode().Perm())
		}
	}
	recs := readRecords(t, dir)
	want := macOf([]byte(canary))
	var obj corev1.Secret
	if err := json.Unmarshal(recs[0].Object, &obj); err == nil {
		t.Errorf("the captured data decoded as base64: it is not redacted")
	}
	var m struct{ Data, StringData map[string]string }
	if err := json.Unmarshal(recs[0].Object, &m); err != nil || m.Data["password"] != want || m.StringData["extra"] != want {
		t.Errorf("object data = %v / %v, want %s", m.Data, m.StringData, want)
	}
	if !strings.Contains(string(recs[0].Patch), want) {
		t.Errorf("patch does not hold the hash: %s", recs[0].Patch)
	}
	if recs[0].SynchookVersion != "v9.9.9" || recs[0].HookType != hooks.CreatePhysical || recs[0].Kind != "Secret" ||
		recs[0].APIVersion != "v1" || recs[0].HooksRun != 1 || strings.Join(recs[0].Hooks, ",") != "secret-copy" {
		t.Errorf("record fields: %+v", recs[0])
	}
	if recs[3].Error == "" || !strings.Contains(recs[3].Error, "secret-copy") || !strings.Contains(recs[3].Error, "its message is withheld") || recs[3].Patch != nil {
		t.Errorf("error record: error %q, patch %s", recs[3].Error, recs[3].Patch)
	}

	// Replayed through the same hooks, every record gives the captured outcome, though the
	// hooks now see hashes where the values were.
	p := NewReplayer(reg, 0)
	for i, rec := range recs {
		if rec.HookType == hooks.GetPhysical && strings.Contains(string(rec.Object), SealedUndo) {
			continue // a Secret's sealed undo is withheld from captures: no replay can open it
		}
		out, err := p.Replay(context.Background(), rec)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !out.Equal {
			t.Errorf("record %d (%s %s) differs on replay:\n%s", i, rec.HookType, rec.Kind, out.Diff)
		}
	}
}

func TestTheSizeBoundDeletesTheOldestFiles(t *testing.T) {
	dir := t.TempDir()
	reg := newRegistry(t, labelHook("team", "team", "a"))
	pod := func(i int) []byte { return fixtures.JSON(fixtures.Pod("default", fmt.Sprintf("pod-%02d", i))) }

	// Measure one record.
	probe := newWriter(t, Options{Dir: filepath.Join(dir, "probe"), Registry: reg})
	mutate(t, engine.NewRunner(reg, engine.RunnerOptions{Capture: probe.Capture}), podGVK, hooks.CreatePhysical, pod(0))
	probe.Close()
	files, _ := Files(filepath.Join(dir, "probe"))
	info, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	size := info.Size()

	// A file of an earlier run counts towards the bound and goes first.
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o700); err != nil {
		t.Fatal(err)
	}
	earlier := filepath.Join(out, "20000101T000000.000000000Z-000001.json")
	if err := os.WriteFile(earlier, bytes.Repeat([]byte("x"), int(size)), 0o600); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(out, "notes.json") // not a capture file name: never deleted
	if err := os.WriteFile(mine, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, Options{Dir: out, Registry: reg, MaxBytes: 3*size + size/2, Buffer: 64})
	r := engine.NewRunner(reg, engine.RunnerOptions{Capture: w.Capture})
	for i := 1; i <= 10; i++ {
		mutate(t, r, podGVK, hooks.CreatePhysical, pod(i))
	}
	w.Close()
	if _, err := os.Stat(earlier); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the earlier run's file is still there: %v", err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("a file that is not a capture file was deleted: %v", err)
	}
	var names []string
	var total int64
	for _, rec := range readRecordsExcept(t, out, "notes.json") {
		var p corev1.Pod
		if err := json.Unmarshal(rec.Object, &p); err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	all, _ := Files(out)
	for _, f := range all {
		if filepath.Base(f) == "notes.json" {
			continue
		}
		info, _ := os.Stat(f)
		total += info.Size()
	}
	if got := strings.Join(names, ","); got != "pod-08,pod-09,pod-10" {
		t.Errorf("kept %s, want the newest three: pod-08,pod-09,pod-10", got)
	}
	if total > 3*size+size/2 {
		t.Errorf("total %d bytes over the bound %d", total, 3*size+size/2)
	}
}

func readRecordsExcept(t *testing.T, dir, skip string) []*Record {
	t.Helper()
	files, _ := Files(dir)
	var out []*Record
	for _, f := range files {
		if filepath.Base(f) == skip {
			continue
		}
		rec, err := ReadFile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, rec)
	}
	return out
}

func TestReplayShowsWhatAChangedHookChanges(t *testing.T) {
	dir := t.TempDir()
	reg := newRegistry(t, labelHook("team", "team", "a"))
	w := newWriter(t, Options{Dir: dir, Registry: reg})
	r := engine.NewRunner(reg, engine.RunnerOptions{Capture: w.Capture})
	hooked := mutate(t, r, podGVK, hooks.CreatePhysical, fixtures.JSON(fixtures.Pod("default", "web")))
	mutate(t, r, podGVK, hooks.GetPhysical, hooked)
	w.Close()
	recs := readRecords(t, dir)
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}

	same := NewReplayer(newRegistry(t, labelHook("team", "team", "a")), 0)
	changed := NewReplayer(newRegistry(t, labelHook("team", "team", "b")), 0)
	for i, rec := range recs {
		out, err := same.Replay(context.Background(), rec)
		if err != nil || !out.Equal {
			t.Errorf("record %d with the same hooks: %v, %+v", i, err, out)
		}
	}
	out, err := changed.Replay(context.Background(), recs[0])
	if err != nil || out.Equal {
		t.Fatalf("CreatePhysical with team=b: %v, equal %v", err, out.Equal)
	}
	for _, want := range []string{"--- captured", "+++ replayed", "-    team: a", "+    team: b"} {
		if !strings.Contains(out.Diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, out.Diff)
		}
	}
	if strings.Join(out.Hooks, ",") != "team" {
		t.Errorf("hooks %v", out.Hooks)
	}
	// The undo the team=a chain sealed is synchook's own whatever is configured now: the
	// changed build still takes the label off on the way up (the read is the same).
	if out, err := changed.Replay(context.Background(), recs[1]); err != nil || !out.Equal {
		t.Errorf("GetPhysical with team=b: %v, equal %v; want the sealed undo applied as before", err, out.Equal)
	}
}

func TestCaptureSamplesAndNeverBlocks(t *testing.T) {
	if _, err := New(Options{Dir: t.TempDir(), Sample: 1.5}); err == nil {
		t.Error("sample 1.5 accepted")
	}
	dir := t.TempDir()
	reg := newRegistry(t, labelHook("team", "team", "a"))
	// A writer that never runs: its buffer of 2 fills and further samples are dropped.
	w, err := New(Options{Dir: dir, Sample: 1, Buffer: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := engine.NewRunner(reg, engine.RunnerOptions{Capture: w.Capture})
	for range 10 {
		mutate(t, r, podGVK, hooks.CreatePhysical, fixtures.JSON(fixtures.Pod("default", "web")))
	}
	if got := w.dropped.Load(); got != 8 {
		t.Errorf("dropped %d, want 8", got)
	}
	w.Close() // never ran: returns at once

	dir = t.TempDir()
	w = newWriter(t, Options{Dir: dir, Sample: 0.25, Buffer: 10000})
	r = engine.NewRunner(reg, engine.RunnerOptions{Capture: w.Capture})
	for range 2000 {
		if _, err := r.Mutate(context.Background(), podGVK, hooks.CreatePhysical, fixtures.JSON(fixtures.Pod("default", "web"))); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	files, _ := Files(dir)
	if n := len(files); n < 350 || n > 650 {
		t.Errorf("%d of 2000 captured at sample 0.25", n)
	}
}

// ReadFile reads and checks one capture file.
func ReadFile(path string) (*Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseRecord(b)
}
