package vcluster

import (
	"bytes"
	"io"
	"os"
	"sync"
	"testing"
)

// outputCapture redirects os.Stdout and os.Stderr to pipes while vcluster's manager creates
// its plugin clients, which is when it binds them: its hclog logger (plugin lifecycle lines and
// the plugin's stderr as go-plugin forwards it) and go-plugin's SyncStdout/SyncStderr (the
// plugin's stdout/stderr after the handshake, streamed over gRPC) write to what os.Stdout and
// os.Stderr were then. Nothing may call t.Log between capture and release.
type outputCapture struct {
	oldOut, oldErr *os.File
	wOut, wErr     *os.File
	wg             sync.WaitGroup
	stdout, stderr bytes.Buffer
	closeOnce      sync.Once
}

func captureOutput(tb testing.TB) *outputCapture {
	tb.Helper()
	c := &outputCapture{oldOut: os.Stdout, oldErr: os.Stderr}
	rOut, wOut, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	rErr, wErr, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	c.wOut, c.wErr = wOut, wErr
	c.wg.Go(func() { _, _ = io.Copy(&c.stdout, rOut); rOut.Close() })
	c.wg.Go(func() { _, _ = io.Copy(&c.stderr, rErr); rErr.Close() })
	os.Stdout, os.Stderr = wOut, wErr
	tb.Cleanup(func() { c.release(); c.output() })
	return c
}

// release restores os.Stdout and os.Stderr; what was bound to the pipes keeps writing there.
func (c *outputCapture) release() {
	os.Stdout, os.Stderr = c.oldOut, c.oldErr
}

// output closes the pipes and returns what was written to them. Call it after the plugins
// were killed (or failed to start), when go-plugin has flushed their output.
func (c *outputCapture) output() (stdout, stderr string) {
	c.closeOnce.Do(func() {
		c.wOut.Close()
		c.wErr.Close()
		c.wg.Wait()
	})
	return c.stdout.String(), c.stderr.String()
}
