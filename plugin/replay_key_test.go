package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/capture"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/internal/undo"
)

// reviewConfig is a config with a hook on Pods (team=<team>) and one on Services, each
// writing a label, so that each Create records a sealed undo.
func reviewConfig(t *testing.T, dir, team string) string {
	t.Helper()
	path := filepath.Join(dir, "review-"+team+".yaml")
	cfg := "hooks:\n" +
		"  - name: team-labels\n    resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labels: {labels: {team: " + team + "}}\n" +
		"  - name: service-labels\n    resources: [{apiVersion: v1, kind: Service}]\n    types: [CreatePhysical]\n    labels: {labels: {exposed: \"yes\"}}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// reviewPod is the pod of examples/pod-review.json (an admission Create: no uid, no
// vcluster.loft.sh/object-uid, so its undo is sealed bound to its name and the time).
func reviewPod(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../examples/pod-review.json")
	if err != nil {
		t.Fatal(err)
	}
	var review struct {
		Request struct {
			Object json.RawMessage `json:"object"`
		} `json:"request"`
	}
	if err := json.Unmarshal(b, &review); err != nil || len(review.Request.Object) == 0 {
		t.Fatalf("examples/pod-review.json: %v", err)
	}
	return review.Request.Object
}

// captureReviews serves the Create of examples/pod-review.json's pod and of a Service with the
// registry of config, sealing with ring, through a Runner that captures both into dir.
func captureReviews(t *testing.T, config, dir string, ring *undo.Ring) {
	t.Helper()
	reg, err := sidecar.BuildRegistry(t.Context(), sidecar.RegistryConfig{ConfigFile: config, Keys: undo.NewKeeper(ring)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := capture.New(capture.Options{Dir: dir, Sample: 1, Registry: reg, Version: Version()})
	if err != nil {
		t.Fatal(err)
	}
	go w.Run(t.Context())
	r := engine.NewRunner(reg, engine.RunnerOptions{Capture: w.Capture})
	service := []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web-x-default-x-my-vcluster","namespace":"vcluster-my-vcluster"},"spec":{"ports":[{"port":80}]}}`)
	for _, req := range []struct {
		kind string
		obj  []byte
	}{{"Pod", reviewPod(t)}, {"Service", service}} {
		res, err := r.Mutate(t.Context(), corev1.SchemeGroupVersion.WithKind(req.kind), hooks.CreatePhysical, req.obj)
		if err != nil {
			t.Fatal(err)
		}
		hooked, _ := res.Object()
		if !strings.Contains(string(hooked), `"`+undo.Annotation+`":"s2.`) {
			t.Fatalf("the %s's Create recorded no sealed undo: %s", req.kind, hooked)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeRing writes ring as a key file in dir.
func writeRing(t *testing.T, dir, name string, ring *undo.Ring) string {
	t.Helper()
	text, err := ring.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Replay with the key that captured compares the undo by what it holds (opened with the
// ring), not by its sealed text: a Create's seal carries the time it was sealed, and a ring
// rotated since seals with its newest key, so the same undo has another text at replay.
func TestReplayWithTheCapturingKeyComparesTheOpenedUndo(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	for _, tc := range []struct {
		name   string
		rotate bool // replay with the capture's ring rotated since (a newer sealing key)
		team   string
		code   int
		want   []*regexp.Regexp
		reject []*regexp.Regexp
	}{
		{
			name: "an unchanged config replays equal with the capturing key file", team: "a", code: exitOK,
			want: []*regexp.Regexp{
				regexp.MustCompile(`(?m)^equal +\S+\.json CreatePhysical v1/Pod vcluster-my-vcluster/web-x-default-x-my-vcluster$`),
				regexp.MustCompile(`(?m)^equal +\S+\.json CreatePhysical v1/Service `),
				regexp.MustCompile(`2 requests: 2 equal, 0 different, 0 failed`),
				regexp.MustCompile(`team-labels +1 +0 +0`), regexp.MustCompile(`service-labels +1 +0 +0`),
			},
		},
		{
			name: "an unchanged config replays equal with the capturing key rotated since", rotate: true, team: "a", code: exitOK,
			want: []*regexp.Regexp{
				regexp.MustCompile(`2 requests: 2 equal, 0 different, 0 failed`),
				regexp.MustCompile(`team-labels +1 +0 +0`), regexp.MustCompile(`service-labels +1 +0 +0`),
			},
		},
		{
			name: "a changed hook is the only one the table names different", rotate: true, team: "b", code: exitFailed,
			want: []*regexp.Regexp{
				regexp.MustCompile(`(?m)^DIFFERENT +\S+\.json CreatePhysical v1/Pod vcluster-my-vcluster/web-x-default-x-my-vcluster$`),
				regexp.MustCompile(`(?m)^equal +\S+\.json CreatePhysical v1/Service `),
				regexp.MustCompile(`(?m)^-    team: a$`), regexp.MustCompile(`(?m)^\+    team: b$`),
				regexp.MustCompile(`2 requests: 1 equal, 1 different, 0 failed`),
				regexp.MustCompile(`team-labels +0 +1 +0`), regexp.MustCompile(`service-labels +1 +0 +0`),
			},
			// The diff shows what the undo holds, never sealed text.
			reject: []*regexp.Regexp{regexp.MustCompile(`s2\.[a-z]\.`)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			dir := filepath.Join(tmp, "capture")
			ring, err := undo.GenerateRing()
			if err != nil {
				t.Fatal(err)
			}
			captureReviews(t, reviewConfig(t, tmp, "a"), dir, ring)
			if tc.rotate {
				if ring, err = ring.Rotate(); err != nil {
					t.Fatal(err)
				}
			}
			key := writeRing(t, tmp, "undo.keys", ring)
			code, out, errOut := runCLI(t, "replay", dir, "--config", reviewConfig(t, tmp, tc.team), "--undo-key-file", key)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s\n%s", code, tc.code, out, errOut)
			}
			for _, re := range tc.want {
				if !re.MatchString(out) {
					t.Errorf("output does not match %s:\n%s", re, out)
				}
			}
			for _, re := range tc.reject {
				if re.MatchString(out) {
					t.Errorf("output matches %s:\n%s", re, out)
				}
			}
		})
	}
}

// A captured seal that does not open with --undo-key-file (another key sealed it) is a
// difference, and the diff says why.
func TestReplayWithAnotherKeyReportsTheSealThatDoesNotOpen(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "capture")
	ring, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	config := reviewConfig(t, tmp, "a")
	captureReviews(t, config, dir, ring)
	other, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "replay", dir, "--config", config, "--undo-key-file", writeRing(t, tmp, "other.keys", other))
	if code != exitFailed {
		t.Errorf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"2 requests: 0 equal, 2 different, 0 failed", "does not open with --undo-key-file"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
