package vcluster

// More day-two operations with vcluster's real syncer (docs/day2.md): a removed policy hook
// whose toleration an update cannot take back, and a Go hook upgraded to a build whose output
// differs. As in day2_test.go, the virtual cluster is watched for the whole of each test.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// goHookDir is the Go hook program TestDay2GoHookUpgraded builds, a module of its own.
const goHookDir = "internal/gohook"

// goHookSynchookModule is synchook's module, which goHookDir requires (replaced by repoDir).
const goHookSynchookModule = "github.com/synchook/synchook"

// maxUndoGrowth is how much larger than build a's undo build b's may be (a longer value, one
// more writer): a nested sealed value adds far more.
const maxUndoGrowth = 64

// goHookBuilds are the builds of goHookDir by "value version", once per test binary run.
var goHookBuilds sync.Map // string -> *buildResult

// goHookBinary returns internal/gohook built against the synchook repository under test
// (repoDir) with its label value and synchook's version set at link time (-X main.value,
// -X github.com/synchook/synchook/plugin.version). The version is a Go hook's revision: two
// builds with different versions are, for a sealed undo, different writers. It checks that
// the binary reports that version, so that a renamed variable (-X sets nothing then, silently)
// fails here and not as a confusing test result.
func goHookBinary(tb testing.TB, value, version string) string {
	tb.Helper()
	return goHookBinaryOf(tb, "label", value, version)
}

// goHookBinaryOf is goHookBinary with what the hook sets (-X main.field: "label" or
// "nodeSelector").
func goHookBinaryOf(tb testing.TB, field, value, version string) string {
	tb.Helper()
	return goHookBinaryIn(tb, repoDir(tb), field, value, version)
}

// goHookBinaryIn is goHookBinaryOf built against the synchook repository repo.
func goHookBinaryIn(tb testing.TB, repo, field, value, version string) string {
	tb.Helper()
	b, _ := goHookBuilds.LoadOrStore(repo+" "+field+" "+value+" "+version, &buildResult{})
	r := b.(*buildResult)
	r.once.Do(func() { r.path, r.err = buildGoHook(repo, field, value, version) })
	if r.err != nil {
		tb.Fatalf("build %s (value %s, version %s): %v", goHookDir, value, version, r.err)
	}
	return r.path
}

// buildGoHook copies goHookDir to a fresh directory, points its replace of synchook at repo
// and builds it there (GOWORK=off: nothing of the caller's workspace applies).
func buildGoHook(repo, field, value, version string) (string, error) {
	src, err := os.MkdirTemp(buildDir, "gohook-src-")
	if err != nil {
		return "", err
	}
	outDir, err := os.MkdirTemp(buildDir, "gohook-bin-") // one per repository built against
	if err != nil {
		return "", err
	}
	files := []string{"main.go", "go.mod", "go.sum"}
	if strings.HasPrefix(field, "bound") { // the typed hook's bounds (bound.go), which need this build's synchook
		files = append(files, "bound.go")
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(goHookDir, f))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(src, f), data, 0o644); err != nil {
			return "", err
		}
	}
	out := filepath.Join(outDir, "gohook-"+field+"-"+value+"-"+version)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	env := append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOWORK=off")
	ldflags := fmt.Sprintf("-X main.field=%s -X main.value=%s -X %s/plugin.version=%s", field, value, goHookSynchookModule, version)
	start := time.Now()
	for _, args := range [][]string{
		{"go", "mod", "edit", "-replace=" + goHookSynchookModule + "=" + repo},
		{"go", "build", "-ldflags", ldflags, "-o", out, "."},
		{out, "version"},
	} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir, cmd.Env = src, env
		output, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s in %s: %w\n%s", strings.Join(args, " "), src, err, output)
		}
		if args[0] == out {
			if got, want := strings.TrimSpace(string(output)), "synchook "+version; got != want {
				return "", fmt.Errorf("%s version says %q, want %q: -X %s/plugin.version set nothing", out, got, want, goHookSynchookModule)
			}
		}
	}
	fmt.Fprintf(os.Stderr, "built %s (value %s, version %s) in %s\n", goHookDir, value, version, time.Since(start).Round(time.Millisecond))
	return out, nil
}

// runCleanup runs the synchook binary's cleanup against the host namespace with args and
// returns its stdout, its stderr (where it lists every object) and its exit code: 0 (all
// restored) or 1 (done, something left); any other code fails tb.
func runCleanup(tb testing.TB, cl *clusters, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	kubeconfig := filepath.Join(tb.TempDir(), "host.conf")
	if err := os.WriteFile(kubeconfig, cl.host.kubeconfig, 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.CommandContext(tb.Context(), binary(tb, binSynchook), append([]string{"cleanup", "--namespace", hostNamespace, "--kubeconfig", kubeconfig}, args...)...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	start := time.Now()
	err := cmd.Run()
	tb.Logf("synchook cleanup %s (%s, %v):\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), err, o.String(), e.String())
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return o.String(), e.String(), 1
	case err != nil:
		tb.Fatalf("synchook cleanup %s failed: %v", strings.Join(args, " "), err)
	}
	return o.String(), e.String(), 0
}

// cleanupLines returns the lines cleanup printed for the object named name: the line that
// names it and the indented lines under it.
func cleanupLines(out, name string) string {
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasSuffix(line, "/"+name):
			lines = append(lines, line)
		case len(lines) > 0 && strings.HasPrefix(line, "  "):
			lines = append(lines, line)
		case len(lines) > 0:
			return strings.Join(lines, "\n")
		}
	}
	return strings.Join(lines, "\n")
}

// TestDay2PolicyRemoved: a policy that sets a toleration and a nodeSelector entry on Pods (an
// update of a pod cannot take them back) is removed, a labels hook stays. The host pod keeps
// the toleration for its life; docs/day2.md says its undo entry stays recorded ("kept") on the
// host pod through every later write, so that `synchook cleanup` lists it. After the restart
// without the policy, two tenant updates each reach the host pod with the labels hook's label;
// the virtual pod never shows the label, the toleration or a synchook.io/* annotation; and at
// the end, with the syncer stopped, `synchook cleanup --dry-run` lists the host pod's
// /spec/tolerations (and the nodeSelector) as not restorable.
func TestDay2PolicyRemoved(t *testing.T) {
	binary(t, binSynchook) // built before the clock starts
	began := time.Now()
	cl := startClusters(t)
	virtualEvents := recordEvents(t, cl.virtual, tenantNS)
	hostEvents := recordEvents(t, cl.host, hostNamespace)
	team := teamHook("team-label", "v1", "CreatePhysical", "UpdatePhysical")
	s := startSyncer(t, cl, day2Plugin(t, team, poolSchedulingHook(t)))
	ctx := t.Context()
	if _, err := cl.virtual.cs.CoreV1().Pods(tenantNS).Create(ctx, tenantPod("web", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	policyAndTeam := func(o object) string {
		if miss := hasLabels(map[string]string{teamLabel: "v1"})(o); miss != "" {
			return miss
		}
		if !hasPolicyToleration(o.(*corev1.Pod)) {
			return "no toleration " + policyTolerationKey
		}
		return ""
	}
	hp := waitHost(t, cl, kindPod, "web", policyAndTeam)
	hostName := hp.GetName()
	t.Logf("host pod %s created: labels %v, tolerations %v, nodeSelector %v, undo %d bytes",
		hostName, hp.GetLabels(), hp.(*corev1.Pod).Spec.Tolerations, hp.(*corev1.Pod).Spec.NodeSelector, len(hp.GetAnnotations()[undoAnnotation]))
	requireNoTraces(t, virtualEvents, kindPod, "web", "created", teamLabel)

	s.stop()
	restart := time.Now()
	s = startSyncer(t, cl, day2Plugin(t, team))
	t.Logf("restarted without the policy in %s", time.Since(restart).Round(time.Millisecond))
	for rev := 1; rev <= 2; rev++ {
		want := fmt.Sprint(rev)
		patchVirtual(t, cl, kindPod, "web", fmt.Sprintf(`{"metadata":{"labels":{"rev":%q}}}`, want))
		hp = waitHost(t, cl, kindPod, "web", hasLabels(map[string]string{"rev": want}))
		if got := hp.GetLabels()[teamLabel]; got != "v1" {
			t.Errorf("update %d: the host pod's %s=%q, want the labels hook's v1", rev, teamLabel, got)
		}
		if !hasPolicyToleration(hp.(*corev1.Pod)) {
			t.Errorf("update %d: the host pod lost the removed policy's toleration (the apiserver does not let an update remove one)", rev)
		}
		u := hp.GetAnnotations()[undoAnnotation]
		if undoKeyID(u) == "" {
			t.Errorf("update %d: the host pod's %s is not a sealed value (%d bytes: %.30q)", rev, undoAnnotation, len(u), u)
		}
		t.Logf("update %d reached the host pod: labels %v, undo %d bytes", rev, hp.GetLabels(), len(u))
		requireNoTraces(t, virtualEvents, kindPod, "web", fmt.Sprintf("update %d", rev), teamLabel)
	}
	settleObjects(t, []*eventRecorder{hostEvents, virtualEvents}, kindPod, "web")
	requireNoTraces(t, virtualEvents, kindPod, "web", "whole test", teamLabel)
	evs, _ := virtualEvents.since(time.Time{}, func(ev recordedEvent) bool { return ev.kind == kindPod && ev.obj.GetName() == "web" })
	t.Logf("%d events of the virtual pod checked", len(evs))

	// With the syncer stopped (docs/day2.md: cleanup runs against a stopped vcluster).
	s.stop()
	before, err := hostObject(ctx, cl.host.cs, kindPod, "web")
	if err != nil || before == nil {
		t.Fatalf("host pod: %v", err)
	}
	_, errOut, code := runCleanup(t, cl, "--dry-run")
	if code != 1 {
		t.Errorf("cleanup --dry-run exited %d, want 1 (entries left unrestored)", code)
	}
	lines := cleanupLines(errOut, hostName)
	for _, want := range []string{"would clean", "not restorable", "/spec/tolerations", "/spec/nodeSelector"} {
		if !strings.Contains(lines, want) {
			t.Errorf("cleanup --dry-run's lines for the host pod %s do not say %q (the removed policy's changes are no longer on record in its %s):\n%s",
				hostName, want, undoAnnotation, lines)
		}
	}
	after, err := hostObject(ctx, cl.host.cs, kindPod, "web")
	if err != nil || after == nil {
		t.Fatalf("host pod: %v", err)
	}
	if after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("cleanup --dry-run wrote the host pod (resourceVersion %s -> %s)", before.GetResourceVersion(), after.GetResourceVersion())
	}
	t.Logf("wall time without the builds: %s", time.Since(began).Round(time.Millisecond))
}

// TestDay2GoHookUpgraded: a Go hook (internal/gohook: team=<value> on Pods, CreatePhysical and
// UpdatePhysical) upgraded to a build whose output differs (team=a → team=b, and another
// version: another writer for the sealed undo). The read after the upgrade cannot apply all of
// build a's undo (the Update chain no longer has its writer) but takes the label off, as
// labels are what an update may change back: the virtual pod never shows team or a
// synchook.io/* annotation; the next tenant update reaches the host with team=b and one sealed
// undo (not nested: about as large as build a's), under 2 KiB. That undo must take build a's value for synchook's, not the
// tenant's: `synchook cleanup` at the end (syncer stopped) leaves the host pod without team.
func TestDay2GoHookUpgraded(t *testing.T) {
	binA, binB := goHookBinary(t, "a", "e2e-gohook-a"), goHookBinary(t, "b", "e2e-gohook-b")
	binary(t, binSynchook) // for cleanup; built before the clock starts
	began := time.Now()
	goHook := func(bin string) syncerSpec {
		return syncerSpec{Plugins: []syncerPlugin{{Dir: "gohook", Binary: bin}}}
	}
	cl := startClusters(t)
	virtualEvents := recordEvents(t, cl.virtual, tenantNS)
	hostEvents := recordEvents(t, cl.host, hostNamespace)
	s := startSyncer(t, cl, goHook(binA))
	ctx := t.Context()
	if _, err := cl.virtual.cs.CoreV1().Pods(tenantNS).Create(ctx, tenantPod("web", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hp := waitHost(t, cl, kindPod, "web", hasLabels(map[string]string{teamLabel: "a"}))
	firstUndo := hp.GetAnnotations()[undoAnnotation]
	t.Logf("host pod %s created by build a: labels %v, undo %d bytes", hp.GetName(), hp.GetLabels(), len(firstUndo))
	requireNoTraces(t, virtualEvents, kindPod, "web", "created", teamLabel)

	s.stop()
	restart := time.Now()
	s = startSyncer(t, cl, goHook(binB))
	t.Logf("restarted with build b in %s", time.Since(restart).Round(time.Millisecond))
	patchVirtual(t, cl, kindPod, "web", `{"metadata":{"labels":{"rev":"1"}}}`)
	hp = waitHost(t, cl, kindPod, "web", hasLabels(map[string]string{"rev": "1"}))
	if got := hp.GetLabels()[teamLabel]; got != "b" {
		t.Errorf("after the tenant's update the host pod's %s=%q, want build b's b", teamLabel, got)
	}
	u := hp.GetAnnotations()[undoAnnotation]
	t.Logf("the tenant's update reached the host pod: labels %v, undo %d bytes (%.12s…)", hp.GetLabels(), len(u), u)
	if n := strings.Count(u, "s2.") + strings.Count(u, "s1."); n != 1 {
		t.Errorf("the host pod's %s holds %d sealed values, want 1 (nested?): %d bytes", undoAnnotation, n, len(u))
	}
	if len(u) >= maxDay2UndoBytes {
		t.Errorf("the host pod's %s is %d bytes, want < %d", undoAnnotation, len(u), maxDay2UndoBytes)
	}
	// A sealed value nested in another is ciphertext there (no "s2." to count): build b's undo
	// records the same one label as build a's, so it is about as large.
	if len(u) > len(firstUndo)+maxUndoGrowth {
		t.Errorf("the host pod's %s is %d bytes after the upgrade, build a's was %d: more than the label's entry (build a's undo nested, or its value recorded as the tenant's?)",
			undoAnnotation, len(u), len(firstUndo))
	}
	settleObjects(t, []*eventRecorder{hostEvents, virtualEvents}, kindPod, "web")
	if hp, err := hostObject(ctx, cl.host.cs, kindPod, "web"); err != nil || hp == nil || hp.GetLabels()[teamLabel] != "b" {
		t.Errorf("settled: the host pod is not labelled %s=b (%v): %s", teamLabel, err, brief(hp))
	}
	requireNoTraces(t, virtualEvents, kindPod, "web", "whole test", teamLabel)
	evs, _ := virtualEvents.since(time.Time{}, func(ev recordedEvent) bool { return ev.kind == kindPod && ev.obj.GetName() == "web" })
	t.Logf("%d events of the virtual pod checked", len(evs))

	// Uninstall: build b's undo says the label was absent before the hooks (build a's value
	// is no tenant's), so cleanup, with the syncer stopped, takes it off and restores nothing
	// else; the tenant's labels stay.
	s.stop()
	_, errOut, _ := runCleanup(t, cl)
	lines := cleanupLines(errOut, hp.GetName())
	if !strings.Contains(lines, "cleaned") || strings.Contains(lines, "not restorable") || strings.Contains(lines, "not applied") {
		t.Errorf("cleanup's lines for the host pod %s, want it cleaned and nothing left:\n%s", hp.GetName(), lines)
	}
	clean, err := hostObject(ctx, cl.host.cs, kindPod, "web")
	if err != nil || clean == nil {
		t.Fatalf("host pod: %v", err)
	}
	if tr := day2Traces(clean, teamLabel); len(tr) > 0 {
		t.Errorf("after cleanup the host pod shows %v, want no hook value and no synchook.io annotation (build a's team=a recorded as the tenant's own?): %s", tr, brief(clean))
	}
	if miss := hasLabels(map[string]string{"app": "web", "rev": "1"})(clean); miss != "" {
		t.Errorf("after cleanup the host pod lost the tenant's labels: %s", miss)
	}
	t.Logf("wall time without the builds: %s", time.Since(began).Round(time.Millisecond))
}
