package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/synchook/synchook/certs"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on Linux).
const clockTicks = 100

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startSidecar starts `binary serve` on free loopback ports, a unix socket and the gRPC bridge,
// with benchConfig, and waits until it answers.
func startSidecar(ctx context.Context, binary, config string, serveFlags ...string) (*sidecar, error) {
	dir, err := os.MkdirTemp("", "synchook-bench-")
	if err != nil {
		return nil, err
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	sc := &sidecar{
		dir:       dir,
		httpsAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		grpcAddr:  fmt.Sprintf("127.0.0.1:%d", ports[1]),
		sock:      filepath.Join(dir, "synchook.sock"),
	}
	args := []string{
		"serve",
		"--bind-address", sc.httpsAddr, "--health-probe-bind-address", "0", "--metrics-bind-address", "0",
		"--cert-dir", filepath.Join(dir, "certs"), "--socket-path", sc.sock,
		"--plugin-address", sc.grpcAddr, "--vcluster-address", fmt.Sprintf("127.0.0.1:%d", ports[2]),
		"--zap-log-level", "error",
	}
	args = append(args, serveFlags...)
	sc.cmd = exec.CommandContext(ctx, binary, args...)
	sc.cmd.Env = append(os.Environ(), "SYNCHOOK_CONFIG="+config, "VCLUSTER_PLUGIN_ADDRESS=", "VCLUSTER_PLUGIN_NAME=")
	var stderr bytes.Buffer
	sc.cmd.Stderr = &stderr
	if err := sc.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if sc.pool == nil {
			sc.pool, _ = certs.LoadCertPool(filepath.Join(dir, "certs", "ca.crt"))
		}
		if sc.pool != nil {
			hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: sc.pool}}}
			if resp, err := hc.Get("https://" + sc.httpsAddr + "/readyz"); err == nil {
				resp.Body.Close()
				if c, err := net.Dial("tcp", sc.grpcAddr); err == nil {
					c.Close()
					return sc, nil
				}
			}
		}
		if time.Now().After(deadline) {
			sc.stop()
			return nil, fmt.Errorf("sidecar did not become ready: %s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (sc *sidecar) stop() {
	if sc.cmd.Process != nil {
		terminate(sc.cmd, 10*time.Second)
	}
	_ = os.RemoveAll(sc.dir)
}

func (sc *sidecar) admissionHTTPS(review []byte) func(context.Context) error {
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: sc.pool, NextProtos: []string{"http/1.1"}},
		ForceAttemptHTTP2:   false,
		MaxIdleConnsPerHost: 128,
		WriteBufferSize:     64 << 10, // as hookclient: one write per request
	}
	hc := &http.Client{Transport: tr}
	url := "https://" + sc.httpsAddr + "/mutate/CreatePhysical"
	return func(ctx context.Context) error { return post(ctx, hc, url, review) }
}

func (sc *sidecar) admissionUnix(review []byte) func(context.Context) error {
	tr := &http.Transport{
		MaxIdleConnsPerHost: 128,
		WriteBufferSize:     64 << 10,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sc.sock)
		},
	}
	hc := &http.Client{Transport: tr}
	return func(ctx context.Context) error { return post(ctx, hc, "http://synchook/mutate/CreatePhysical", review) }
}

// cpu returns the sidecar's user+system CPU time so far.
func (sc *sidecar) cpu() (time.Duration, error) { return processCPU(sc.cmd.Process.Pid) }

// processCPU returns the user+system CPU time of process pid so far.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// fields after the ")" that ends the command name: state is field 3; utime 14, stime 15
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

func (sc *sidecar) statusKB(key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", sc.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("%s not in /proc status", key)
}

func (sc *sidecar) rss() (int64, error)     { return sc.statusKB("VmRSS") }
func (sc *sidecar) peakRSS() (int64, error) { return sc.statusKB("VmHWM") }
