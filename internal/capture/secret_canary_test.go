package capture

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/canary"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
)

// TestCaptureFilesHoldNoFormOfASecretCanary captures every request (sample 1) of a Secret
// whose values a hook copies (so the patch and the undo annotation carry them), whose
// kubectl last-applied annotation holds them, and whose hook fails in every way canary.Leaks
// knows, alone and in a SecretList; no capture file holds the value in any encoding, its
// unkeyed SHA-256 included.
func TestCaptureFilesHoldNoFormOfASecretCanary(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "capture")
	reg := newRegistry(t, secretHook(), canary.Hook("leaky", hooks.UpdatePhysical))
	w := newWriter(t, Options{Dir: dir, Registry: reg, Buffer: 1024})
	r := engine.NewRunner(reg, engine.RunnerOptions{Capture: w.Capture})

	want := 0 // requests capture writes: not those that failed on a deadline
	hooked := mutate(t, r, secretGVK, hooks.CreatePhysical, canary.SecretJSON(-1))
	mutate(t, r, secretGVK, hooks.GetPhysical, hooked)
	want += 2
	for i, leak := range canary.Leaks {
		list := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"SecretList","items":[%s]}`, canary.SecretJSON(i))
		for gvk, object := range map[string][]byte{"Secret": canary.SecretJSON(i), "SecretList": list} {
			_, err := r.Mutate(t.Context(), corev1.SchemeGroupVersion.WithKind(gvk), hooks.UpdatePhysical, object)
			if err == nil {
				t.Fatalf("%s: %s did not fail", leak.Name, gvk)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				want++
			}
		}
	}
	w.Close()

	files, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != want {
		t.Errorf("%d files for %d captured requests", len(files), want)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		canary.Check(t, "capture file "+filepath.Base(f), string(b), canary.Value)
	}
}

func TestASecretValueIsCapturedAsAKeyedMAC(t *testing.T) {
	dir := t.TempDir()
	reg := newRegistry(t, secretHook())
	w := newWriter(t, Options{Dir: dir, Registry: reg})
	r := engine.NewRunner(reg, engine.RunnerOptions{Capture: w.Capture})
	mutate(t, r, secretGVK, hooks.CreatePhysical, canary.SecretJSON(-1))
	w.Close()
	recs := readRecords(t, dir)
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	var obj struct {
		Metadata   struct{ Annotations map[string]string }
		Data       map[string]string
		StringData map[string]string
	}
	if err := json.Unmarshal(recs[0].Object, &obj); err != nil {
		t.Fatal(err)
	}
	unkeyed := sha256.Sum256([]byte(canary.Value))
	mac := regexp.MustCompile(`^hmac-sha256:[0-9a-f]{64}$`)
	cases := []struct {
		name, got string
	}{
		{"a data value", obj.Data["password"]},
		{"a stringData value", obj.StringData["note"]},
		{"kubectl's last-applied annotation", obj.Metadata.Annotations[corev1.LastAppliedConfigAnnotation]},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is an HMAC, not the unkeyed SHA-256", func(t *testing.T) {
			if !mac.MatchString(tc.got) {
				t.Fatalf("captured %q", tc.got)
			}
			if strings.HasSuffix(tc.got, hex.EncodeToString(unkeyed[:])) {
				t.Errorf("captured the unkeyed SHA-256 of the value")
			}
		})
	}
	t.Run("one value in data and in stringData has one MAC in one process", func(t *testing.T) {
		if obj.Data["password"] != obj.StringData["note"] || obj.Data["password"] != macOf([]byte(canary.Value)) {
			t.Errorf("data %s, stringData %s", obj.Data["password"], obj.StringData["note"])
		}
	})
	t.Run("the key is not in the capture directory", func(t *testing.T) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			if strings.Contains(string(b), hex.EncodeToString(macKey)) || strings.Contains(string(b), string(macKey)) {
				t.Errorf("%s holds the key", e.Name())
			}
		}
	})
}

func TestReplayOfSecretsWithWithheldErrorsAndOldHashes(t *testing.T) {
	reg := newRegistry(t, secretHook(), canary.Hook("leaky", hooks.UpdatePhysical))
	p := NewReplayer(reg, 0)

	t.Run("a withheld failure replays as the same failure though its detail differs", func(t *testing.T) {
		dir := t.TempDir()
		w := newWriter(t, Options{Dir: dir, Registry: reg})
		r := engine.NewRunner(reg, engine.RunnerOptions{Capture: w.Capture})
		if _, err := r.Mutate(t.Context(), secretGVK, hooks.UpdatePhysical, canary.SecretJSON(1)); err == nil {
			t.Fatal("no failure")
		}
		w.Close()
		recs := readRecords(t, dir)
		if len(recs) != 1 || !strings.Contains(recs[0].Error, "is withheld (detail ") {
			t.Fatalf("records %+v", recs)
		}
		out, err := p.Replay(t.Context(), recs[0])
		if err != nil {
			t.Fatal(err)
		}
		if !out.Equal || out.CapturedError == out.ReplayedError {
			t.Errorf("equal %v; captured %q, replayed %q: want equal, the details apart", out.Equal, out.CapturedError, out.ReplayedError)
		}
	})
	t.Run("a file with the unkeyed sha256 of an older build still replays", func(t *testing.T) {
		sum := sha256.Sum256([]byte("old"))
		old := "sha256:" + hex.EncodeToString(sum[:])
		secret := fixtures.Secret("default", "db", "x")
		secret.Data = nil
		object, _ := json.Marshal(secret)
		object = []byte(strings.Replace(string(object), `"type"`, fmt.Sprintf(`"data":{"password":%q},"type"`, old), 1))
		rec := &Record{Format: FormatVersion, HookType: hooks.CreatePhysical, APIVersion: "v1", Kind: "Secret", Object: object}
		hooked, err := p.Replay(t.Context(), rec)
		if err != nil {
			t.Fatal(err)
		}
		if hooked.ReplayedError != "" || !strings.Contains(string(hooked.Replayed), `"password-copy":"`+old+`"`) {
			t.Errorf("replayed %s, error %q", hooked.Replayed, hooked.ReplayedError)
		}
	})
}

// Regression (issue 25): Secret values that are not strings — an object the typed decoder
// refuses ("data":["…"], "stringData":{"k":["…"]}, a number) — were captured as they were.
func TestRefusedSecretsAreCapturedRedacted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "capture")
	reg := newRegistry(t, secretHook())
	w := newWriter(t, Options{Dir: dir, Registry: reg, Buffer: 64})
	r := engine.NewRunner(reg, engine.RunnerOptions{Capture: w.Capture})
	v, _ := json.Marshal(canary.Value)
	for _, object := range []string{
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"},"data":[` + string(v) + `]}`,
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"b"},"stringData":{"k":[` + string(v) + `]}}`,
		`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"c"},"stringData":{"k":{"nested":` + string(v) + `}}}`,
	} {
		if _, err := r.Mutate(t.Context(), secretGVK, hooks.CreatePhysical, []byte(object)); err == nil {
			t.Fatalf("%s was accepted", object)
		}
	}
	w.Close()
	files, err := Files(dir)
	if err != nil || len(files) != 3 {
		t.Fatalf("%d files, %v; want 3 (refused objects are captured)", len(files), err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		canary.Check(t, "capture file "+filepath.Base(f), string(b), canary.Value)
	}
}
