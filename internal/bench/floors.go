package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/synchook/synchook/certs"
	"github.com/synchook/synchook/internal/bridge/remote"
)

// FloorsCommand is the hidden subcommand that ServeFloors runs under, so that the floors live
// in their own process like the sidecar does (a fair comparison: both sides cross a process
// boundary).
const FloorsCommand = "bench-floors"

// ServeFloors serves floor (b), an HTTPS handler that reads the body and echoes it, with the
// same kind of generated ECDSA certificate as the sidecar, floor (c), a gRPC Plugin that
// answers mutated=false, and the vcluster-sdk style v1 plugin (the reference), on loopback
// until ctx ends. It writes one line to out: "https=ADDR grpc=ADDR sdk=ADDR ca=PATH".
func ServeFloors(ctx context.Context, out io.Writer) error {
	dir, err := os.MkdirTemp("", "synchook-floors-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ca, err := certs.New(certs.Options{Dir: dir})
	if err != nil {
		return err
	}
	if err := ca.Ensure(); err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(ca.CertFile(), ca.KeyFile())
	if err != nil {
		return err
	}
	hl, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return err
	}
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gs := grpc.NewServer()
	remote.RegisterPluginServer(gs, noopPlugin{})
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ss := grpc.NewServer()
	remote.RegisterPluginServer(ss, sdkPluginV1{})
	go func() { _ = hs.Serve(hl) }()
	go func() { _ = gs.Serve(gl) }()
	go func() { _ = ss.Serve(sl) }()
	fmt.Fprintf(out, "https=%s grpc=%s sdk=%s ca=%s\n", hl.Addr(), gl.Addr(), sl.Addr(), ca.CAFile())
	<-ctx.Done()
	gs.Stop()
	ss.Stop()
	return hs.Close()
}

// floorProcess is a running ServeFloors child.
type floorProcess struct {
	cmd                  *exec.Cmd
	httpsAddr, grpc, sdk string
	caFile               string
}

// cpu is the floors' process CPU time so far (the workloads take turns, so the CPU spent
// during a floor's cell is that floor's).
func (f *floorProcess) cpu() (time.Duration, error) { return processCPU(f.cmd.Process.Pid) }

func startFloors(ctx context.Context, binary string) (*floorProcess, error) {
	cmd := exec.CommandContext(ctx, binary, FloorsCommand)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start floors: %w", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("floors process: %w", err)
	}
	fp := &floorProcess{cmd: cmd}
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "https":
			fp.httpsAddr = v
		case "grpc":
			fp.grpc = v
		case "sdk":
			fp.sdk = v
		case "ca":
			fp.caFile = v
		}
	}
	if fp.httpsAddr == "" || fp.grpc == "" || fp.sdk == "" || fp.caFile == "" {
		_ = cmd.Process.Kill()
		return nil, errors.New("floors process: bad first line " + line)
	}
	return fp, nil
}

func (fp *floorProcess) stop() { terminate(fp.cmd, 5*time.Second) }

// terminate sends cmd's process SIGTERM and waits for it to end, killing it after grace.
func terminate(cmd *exec.Cmd, grace time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
	}
}

// echoCaller posts body to the floor's echo server on a kept HTTP/1.1 connection.
func (fp *floorProcess) echoCaller(body []byte) (func(context.Context) error, error) {
	pool, err := certs.LoadCertPool(fp.caFile)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}, MaxIdleConnsPerHost: 128,
		WriteBufferSize: 64 << 10, // the same client as the admission workload
	}}
	url := "https://" + strings.Replace(fp.httpsAddr, "127.0.0.1", "localhost", 1) + "/"
	return func(ctx context.Context) error { return post(ctx, hc, url, body) }, nil
}
