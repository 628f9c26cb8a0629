package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Print writes the report as tables: every cell with its ratio to its floor, then the targets.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "floor (a) typed decode+encode of the 5 KiB Pod: %v per op\n", r.DecodeEncodeFloorPerOp.Round(time.Microsecond))
	fmt.Fprintf(w, "sidecar RSS: idle %.1f MiB, peak %.1f MiB\n\n", mib(r.RSSIdle), mib(r.RSSPeak))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tconc\treqs\terrs\treq/s\tp50\tp99\tp999\tp50 / floor\tserver CPU s/1000\t")
	for _, c := range r.Cells {
		ratio := "-"
		if f, ok := r.floorFor(c); ok && f > 0 {
			ratio = fmt.Sprintf("%.2fx", float64(c.P50)/float64(f))
		}
		cpu := "-"
		if c.ServerCPU > 0 {
			cpu = fmt.Sprintf("%.3f", c.ServerCPU.Seconds()*1000/float64(max(c.Requests, 1)))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%v\t%v\t%v\t%s\t%s\t\n", c.Workload, c.Concurrency, c.Requests, c.Errors,
			c.Throughput(), us(c.P50), us(c.P99), us(c.P999), ratio, cpu)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	for _, c := range []int{1, 16, 64} {
		a, ok1 := r.Find(AdmissionHTTPS, c)
		g, ok2 := r.Find(BridgeGRPC, c)
		if ok1 && ok2 && g.Throughput() > 0 {
			fmt.Fprintf(w, "concurrency %d: admission https throughput = %.2fx the vcluster-style gRPC path\n", c, a.Throughput()/g.Throughput())
		}
	}
	for _, c := range []int{1, 16, 64} {
		pairs := []struct{ what, ours, ref string }{
			{"v1: bridge", BridgeGRPC, SDKGRPC},
			{"v2: synchook", SynchookV2, SDKV2},
			{"v2: echo floor", EchoV2, SDKV2},
		}
		for _, p := range pairs {
			o, ok1 := r.Find(p.ours, c)
			s, ok2 := r.Find(p.ref, c)
			if ok1 && ok2 && s.Throughput() > 0 {
				fmt.Fprintf(w, "concurrency %d: %s throughput = %.2fx the sdk-style plugin (%.0f vs %.0f req/s)\n", c, p.what, o.Throughput()/s.Throughput(), o.Throughput(), s.Throughput())
			}
		}
	}
	// Server CPU per mutation, sequential, and the part of it above the same transport's
	// floor (the floor's server answering without work): that part is the server's own work,
	// set against floor (a).
	for _, p := range []struct{ name, transport string }{
		{AdmissionHTTPS, FloorHTTPS}, {BridgeGRPC, FloorGRPC}, {SDKGRPC, FloorGRPC}, {SynchookV2, EchoV2}, {SDKV2, EchoV2},
	} {
		c, ok1 := r.Find(p.name, 1)
		f, ok2 := r.Find(p.transport, 1)
		if !ok1 || !ok2 || c.ServerCPU <= 0 || f.ServerCPU <= 0 || r.DecodeEncodeFloorPerOp <= 0 {
			continue
		}
		perOp, transport := c.ServerCPU/time.Duration(max(c.Requests, 1)), f.ServerCPU/time.Duration(max(f.Requests, 1))
		fmt.Fprintf(w, "server CPU per mutation, %s: %v = transport floor %v + own work %v = %.2fx floor (a)\n", p.name,
			perOp.Round(time.Microsecond), transport.Round(time.Microsecond), (perOp - transport).Round(time.Microsecond),
			float64(perOp-transport)/float64(r.DecodeEncodeFloorPerOp))
	}
	if a, ok := r.Find(AdmissionHTTPS, 1); ok {
		if b, ok := r.Find(FloorHTTPS, 1); ok {
			floor := r.DecodeEncodeFloorPerOp + b.P50
			fmt.Fprintf(w, "sequential admission p50 %v = %.2fx floor (a)+(b) %v\n", us(a.P50), float64(a.P50)/float64(floor), us(floor))
		}
	}
	if u, ok := r.Find(AdmissionUnix, 1); ok {
		if a, ok := r.Find(AdmissionHTTPS, 1); ok {
			fmt.Fprintf(w, "sequential unix socket p50 %v = %.2fx TLS over loopback TCP\n", us(u.P50), float64(u.P50)/float64(a.P50))
		}
	}
}

// floorFor returns the floor a cell is compared with: (a)+(b) for the admission transports,
// (c) for the bridge, at the same concurrency.
func (r *Report) floorFor(c Cell) (time.Duration, bool) {
	switch c.Workload {
	case AdmissionHTTPS, AdmissionUnix:
		b, ok := r.Find(FloorHTTPS, c.Concurrency)
		return r.DecodeEncodeFloorPerOp + b.P50, ok
	case BridgeGRPC, SDKGRPC:
		g, ok := r.Find(FloorGRPC, c.Concurrency)
		return g.P50, ok
	case SynchookV2, SDKV2:
		e, ok := r.Find(EchoV2, c.Concurrency)
		return e.P50, ok
	}
	return 0, false
}

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }
func mib(b int64) float64       { return float64(b) / (1 << 20) }
