package plugin

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synchook/synchook/internal/testenv"
)

// TestMakeRunStopsOnKillOfMake runs README's quickstart command as a user types it, `make run &`
// then `kill $!`: the PID is make's, and the SIGTERM to it must stop synchook and free every
// port it opened (with `go run . serve` make's child was go run, which died and left synchook
// holding them). The ports are free ones, given through SERVE_FLAGS, and the binary goes to a
// temporary RUN_BIN, so a `make run` left open does not disturb it.
func TestMakeRunStopsOnKillOfMake(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary through make")
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"make run &", "kill $!"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README lacks %q, the command this test runs", want)
		}
	}
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on PATH")
	}
	dir := t.TempDir()
	ports := map[string]int{"bind-address": testenv.FreePort(t), "health-probe-bind-address": testenv.FreePort(t), "metrics-bind-address": testenv.FreePort(t)}
	var flags []string
	for name, port := range ports {
		flags = append(flags, fmt.Sprintf("--%s 127.0.0.1:%d", name, port))
	}
	flags = append(flags, "--cert-dir "+filepath.Join(dir, "certs"))
	cmd := exec.Command(makeBin, "-C", "..", "run", "RUN_BIN="+filepath.Join(dir, "synchook"), "SERVE_FLAGS="+strings.Join(flags, " "))
	// As a shell with job control starts `make run &`: a process group of its own, which the
	// cleanup kills whole should anything be left over.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for _, kv := range os.Environ() {
		// make test runs this through make: the inner make is the user's, not a sub-make.
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MAKELEVEL" && k != "MFLAGS" && k != "SYNCHOOK_CONFIG" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// A file, not a pipe: cmd.Wait must return when make exits, not when the last process that
	// inherited its output (an orphan left running) does.
	logFile, err := os.Create(filepath.Join(dir, "make-run.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	logs := func() string { b, _ := os.ReadFile(logFile.Name()); return string(b) }
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid // $!
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	})

	healthz := fmt.Sprintf("http://127.0.0.1:%d/healthz", ports["health-probe-bind-address"])
	testenv.Eventually(t, 10*time.Minute, "make run's /healthz (the build included)", func() error {
		select {
		case <-exited:
			t.Fatalf("make run exited early (%v):\n%s", waitErr, logs())
		default:
		}
		resp, err := http.Get(healthz)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	})

	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil { // kill $!
		t.Fatal(err)
	}
	select {
	case <-exited: // make exits once its child has
	case <-time.After(time.Minute): // a guard against a hang, not a synchronisation
		t.Fatalf("make still running a minute after SIGTERM:\n%s", logs())
	}
	for name, port := range ports {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Errorf("--%s's port %d still taken after kill of make: %v\n%s", name, port, err, logs())
			continue
		}
		ln.Close()
	}
	if !strings.Contains(logs(), "synchook stopped") {
		t.Errorf("synchook did not stop on its own (SIGTERM):\n%s", logs())
	}
}
