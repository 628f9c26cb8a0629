package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/synchook/synchook/hooks"
	"github.com/synchook/synchook/internal/capture"
	"github.com/synchook/synchook/internal/engine"
	"github.com/synchook/synchook/internal/fixtures"
	"github.com/synchook/synchook/internal/sidecar"
	"github.com/synchook/synchook/internal/undo"
)

func teamConfig(t *testing.T, dir, team string) string {
	t.Helper()
	path := filepath.Join(dir, "team-"+team+".yaml")
	cfg := "hooks:\n  - name: team-labels\n    resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical, UpdatePhysical]\n    labels: {labels: {team: " + team + "}}\n" +
		"  - name: secret-labels\n    resources: [{apiVersion: v1, kind: Secret}]\n    types: [CreatePhysical]\n    labels: {labels: {kept: \"yes\"}}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// captureTraffic serves some requests with the registry of config through a Runner that
// captures every one into dir, sealing undos with a new key as serve does; it returns the
// key's file (beside dir), for replay's --undo-key-file.
func captureTraffic(t *testing.T, config, dir string) (keyFile string) {
	t.Helper()
	ring, err := undo.GenerateRing()
	if err != nil {
		t.Fatal(err)
	}
	text, _ := ring.MarshalText()
	keyFile = filepath.Join(filepath.Dir(dir), "undo.keys")
	if err := os.WriteFile(keyFile, text, 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := sidecar.BuildRegistry(context.Background(), sidecar.RegistryConfig{ConfigFile: config, Keys: undo.NewKeeper(ring)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := capture.New(capture.Options{Dir: dir, Sample: 1, Registry: reg, Version: Version()})
	if err != nil {
		t.Fatal(err)
	}
	go w.Run(context.Background())
	r := engine.NewRunner(reg, engine.RunnerOptions{Capture: w.Capture})
	pod := corev1.SchemeGroupVersion.WithKind("Pod")
	for i := range 3 {
		res, err := r.Mutate(context.Background(), pod, hooks.CreatePhysical, fixtures.JSON(fixtures.Pod("default", fmt.Sprintf("web-%d", i))))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 { // the syncer reads the hooked pod back
			hooked, _ := res.Object()
			if _, err := r.Mutate(context.Background(), pod, hooks.GetPhysical, hooked); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := r.Mutate(context.Background(), corev1.SchemeGroupVersion.WithKind("Secret"), hooks.CreatePhysical,
		fixtures.JSON(fixtures.Secret("default", "db", "replay-canary-4711"))); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return keyFile
}

func TestReplayWithTheSameConfigFindsNoDifference(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "capture")
	config := teamConfig(t, tmp, "a")
	key := captureTraffic(t, config, dir)

	code, out, errOut := runCLI(t, "replay", dir, "--config", config, "--undo-key-file", key)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if n := len(regexp.MustCompile(`(?m)^equal `).FindAllString(out, -1)); n != 5 {
		t.Errorf("%d requests equal, want 5:\n%s", n, out)
	}
	for _, want := range []string{"5 requests: 5 equal, 0 different, 0 failed", "team-labels", "secret-labels", "synchook.io/undo"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(errOut, "replaying [") {
		t.Errorf("a progress bar on a stderr that is not a terminal:\n%s", errOut)
	}
}

func TestReplayWithAChangedLabelListsEveryAffectedRequest(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "capture")
	key := captureTraffic(t, teamConfig(t, tmp, "a"), dir)

	if code, out, _ := runCLI(t, "serve", "--help"); code != 0 || !strings.Contains(out, "--capture-sample") {
		t.Errorf("serve --help does not document capture:\n%s", out)
	}
	if code, out, _ := runCLI(t, "replay", "--help"); code != 0 || !strings.Contains(out, "synchook replay DIR") {
		t.Errorf("replay --help does not document replay:\n%s", out)
	}
	code, out, errOut := runCLI(t, "replay", "--config", teamConfig(t, tmp, "b"), dir, "--undo-key-file", key)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	different := regexp.MustCompile(`(?m)^DIFFERENT +\S+\.json CreatePhysical v1/Pod default/(web-\d)$`).FindAllStringSubmatch(out, -1)
	if len(different) != 3 {
		t.Errorf("%d requests listed as different, want the 3 pod creations:\n%s", len(different), out)
	}
	// The read back of web-0 carries the undo the team=a chain sealed, which opens with the
	// key under team=b too: the view is the pod as created, as captured.
	for _, want := range []string{
		"--- captured", "+++ replayed", "-    team: a", "+    team: b",
		"5 requests: 2 equal, 3 different, 0 failed",
		"DIFFERENT  ", "equal      ", "GetPhysical v1/Pod default/web-0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Per hook: team-labels (3 creations differ), the undo's own chain (the read back is equal).
	if !regexp.MustCompile(`team-labels +0 +3 +0`).MatchString(out) || !regexp.MustCompile(`synchook.io/undo +1 +0 +0`).MatchString(out) || !regexp.MustCompile(`secret-labels +1 +0 +0`).MatchString(out) {
		t.Errorf("per-hook summary wrong:\n%s", out)
	}
}

func TestReplayNamesACorruptFileAndGoesOn(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "capture")
	config := teamConfig(t, tmp, "a")
	key := captureTraffic(t, config, dir)
	files, _ := capture.Files(dir)
	// A truncated file in the middle, and a record whose patch does not apply.
	corrupt := filepath.Join(dir, "20000101T000000.000000000Z-000001.json")
	if err := os.WriteFile(corrupt, []byte(`{"format":1,"hookType":"CreatePhys`), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	rec, err := capture.ParseRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	rec.Patch = []byte(`[{"op":"replace","path":"/nothing/here","value":1}]`)
	bad, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(dir, "29990101T000000.000000000Z-000001.json"), bad, 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, "replay", dir, "--config", config, "--undo-key-file", key)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"FAILED     20000101T000000.000000000Z-000001.json: not a capture record",
		"FAILED     29990101T000000.000000000Z-000001.json CreatePhysical v1/Secret default/db: the captured patch does not apply",
		"7 requests: 5 equal, 0 different, 2 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestReplayBadInputExitsTwo(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	tmp := t.TempDir()
	typo := filepath.Join(tmp, "typo.yaml")
	os.WriteFile(typo, []byte("hooks:\n  - resources: [{apiVersion: v1, kind: Pod}]\n    types: [CreatePhysical]\n    labls: {labels: {a: b}}\n"), 0o600)
	dir := filepath.Join(tmp, "capture")
	captureTraffic(t, teamConfig(t, tmp, "a"), dir)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no directory", []string{"replay"}, "want exactly one argument"},
		{"a missing directory", []string{"replay", filepath.Join(tmp, "nope")}, "no such file or directory"},
		{"an empty directory", []string{"replay", t.TempDir()}, "no capture files"},
		{"an unreadable config", []string{"replay", dir, "--config", filepath.Join(tmp, "missing.yaml")}, "missing.yaml"},
		{"an invalid config", []string{"replay", dir, "--config", typo}, `unknown field "labls"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
		})
	}
}

func TestServeCaptureFlagsReachTheSidecar(t *testing.T) {
	fs, opts, _ := serveFlags(os.Getenv)
	if err := fs.Parse([]string{"--capture", "/tmp/x", "--capture-sample", "0.5", "--capture-max-bytes", "1000"}); err != nil {
		t.Fatal(err)
	}
	if opts.CaptureDir != "/tmp/x" || opts.CaptureSample != 0.5 || opts.CaptureMaxBytes != 1000 {
		t.Errorf("options %+v", opts)
	}
	fs, opts, _ = serveFlags(os.Getenv)
	_ = fs.Parse(nil)
	if opts.CaptureDir != "" || opts.CaptureSample != capture.DefaultSample || opts.CaptureMaxBytes != capture.DefaultMaxBytes {
		t.Errorf("defaults %q %v %v", opts.CaptureDir, opts.CaptureSample, opts.CaptureMaxBytes)
	}
	t.Setenv("SYNCHOOK_CONFIG", "")
	code, _, errOut := runCLI(t, "serve", "--capture", t.TempDir(), "--capture-sample", "2", "--health-probe-bind-address", "0", "--cert-dir", t.TempDir())
	if code != 2 || !strings.Contains(errOut, "sample 2") {
		t.Errorf("--capture-sample 2: exit %d, %s", code, errOut)
	}
}

// TestReplayWithoutTheKeyMarksSealedReadsUnverifiable: replay without the capture's key seals
// with a throwaway one; sealed undos of writes compare as "sealed", and the read of an object
// carrying one is unverifiable — neither different nor a failure of the run.
func TestReplayWithoutTheKeyMarksSealedReadsUnverifiable(t *testing.T) {
	t.Setenv("SYNCHOOK_CONFIG", "")
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "capture")
	config := teamConfig(t, tmp, "a")
	captureTraffic(t, config, dir)

	code, out, errOut := runCLI(t, "replay", dir, "--config", config)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "no --undo-key-file: sealed with a throwaway key") {
		t.Errorf("stderr does not say the key is a throwaway one:\n%s", errOut)
	}
	for _, want := range []string{
		"5 requests: 4 equal, 0 different, 0 failed, 1 unverifiable",
		"GetPhysical v1/Pod default/web-0: its sealed undo needs the capture's --undo-key-file to open",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^unverifiable \S+\.json GetPhysical`).MatchString(out) || !regexp.MustCompile(`synchook.io/undo +0 +0 +0 +1`).MatchString(out) {
		t.Errorf("the read is not listed unverifiable:\n%s", out)
	}

	// A changed hook still shows on the writes.
	code, out, errOut = runCLI(t, "replay", dir, "--config", teamConfig(t, tmp, "b"))
	if code != exitFailed || !strings.Contains(out, "5 requests: 1 equal, 3 different, 0 failed, 1 unverifiable") || !strings.Contains(out, "+    team: b") {
		t.Errorf("team=b without the key: exit %d\n%s\n%s", code, out, errOut)
	}
}
