// Command synchook-bench is synchook's load and soak tester, kept out of the production binary:
//
//	go run ./cmd/synchook-bench bench [flags]   throughput, latency, CPU and RSS vs floors, on loopback
//	go run ./cmd/synchook-bench soak  [flags]   every answer checked under chaos hooks
//	go run ./cmd/synchook-bench deadline [flags] the slowest request sent 4 at once: slots and deadline hold
//
// It starts itself as the sidecar (`serve`, the full synchook CLI through package plugin) and
// as the floors' process, so both sides of every ratio cross a process boundary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	_ "github.com/synchook/synchook/config/policy" // the sidecar it measures is the synchook binary, policy hooks linked
	"github.com/synchook/synchook/internal/bench"
	"github.com/synchook/synchook/internal/bridgev2"
	"github.com/synchook/synchook/plugin"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 {
		switch args[0] {
		case "bench":
			os.Exit(runBench(args[1:], os.Stdout, os.Stderr))
		case "soak":
			os.Exit(runSoak(args[1:], os.Stdout, os.Stderr))
		case "deadline":
			os.Exit(runDeadline(args[1:], os.Stdout, os.Stderr))
		case bench.FloorsCommand: // the floors of `bench`, in their own process
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			if err := bench.ServeFloors(ctx, os.Stdout); err != nil {
				fmt.Fprintf(os.Stderr, "synchook-bench %s: %v\n", bench.FloorsCommand, err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	// The reference plugins v2 of `bench`, started by it as vcluster starts plugins.
	if name := os.Getenv(bench.ReferencePluginEnv); name != "" && bridgev2.Started(args, os.Getenv) {
		if err := bench.ServeReferencePluginV2(name); err != nil {
			fmt.Fprintf(os.Stderr, "synchook-bench: %v\n", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	// Everything else (the sidecar that bench and soak start: `serve ...`, and synchook as a
	// plugin v2) is synchook itself.
	plugin.MustInit()
	plugin.MustStart()
}

func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func runBench(args []string, stdout, stderr io.Writer) int {
	o := bench.Options{Out: stdout}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.MaxRequests, "max-requests", 20000, "most requests per workload and concurrency")
	fs.DurationVar(&o.MaxDuration, "max-duration", 2*time.Second, "longest time per workload and concurrency")
	fs.IntVar(&o.Rounds, "rounds", 4, "interleaved rounds per concurrency (each one slice of every workload, in turn); ratios are medians and ranges over them, 3 or more for a meaningful range")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if _, err := bench.Run(context.Background(), o); err != nil {
		fmt.Fprintf(stderr, "synchook-bench bench: %v\n", err)
		return 1
	}
	return 0
}

func runSoak(args []string, stdout, stderr io.Writer) int {
	o := bench.SoakOptions{Out: stdout}
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.Mutations, "mutations", 100000, "requests to send (pods, services, secrets in turn)")
	fs.IntVar(&o.Concurrency, "concurrency", 64, "concurrent callers")
	fs.IntVar(&o.GRPCPercent, "grpc-percent", 30, "share of requests sent through the gRPC bridge (new connection per call); the rest use HTTPS")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	// The soak's servers run in this process; their expected refusals and panics are counted
	// in the report, not logged (and controller-runtime warns when no logger is set).
	ctrl.SetLogger(logr.Discard())
	rep, err := bench.Soak(context.Background(), o)
	if err != nil {
		fmt.Fprintf(stderr, "synchook-bench soak: %v\n", err)
		return 1
	}
	if rep.Corrupted != 0 || rep.Unexpected != 0 {
		return 1
	}
	return 0
}

func runDeadline(args []string, stdout, stderr io.Writer) int {
	o := bench.DeadlineOptions{Out: stdout}
	fs := flag.NewFlagSet("deadline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.Tolerations, "tolerations", 64000, "tolerations of the Pod whose first the strip removes")
	fs.IntVar(&o.Parallel, "parallel", 4, "requests sent at once")
	fs.IntVar(&o.Slots, "max-concurrent-hooks", 2, "synchook serve --max-concurrent-hooks")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds per request timeout")
	fs.DurationVar(&o.Grace, "grace", 500*time.Millisecond, "how long past its request timeout an answer may come")
	timeouts := fs.String("request-timeouts", "2s,300ms", "synchook serve --request-timeout values, comma-separated: one sidecar each")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	for _, t := range strings.Split(*timeouts, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(t))
		if err != nil || d <= 0 {
			fmt.Fprintf(stderr, "synchook-bench deadline: --request-timeouts: %q is not a positive duration\n", t)
			return 2
		}
		o.RequestTimeouts = append(o.RequestTimeouts, d)
	}
	if _, err := bench.Deadline(context.Background(), o); err != nil {
		fmt.Fprintf(stderr, "synchook-bench deadline: %v\n", err)
		return 1
	}
	return 0
}
