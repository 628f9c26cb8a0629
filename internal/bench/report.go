package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"
)

// Print writes the report as tables: every cell with its ratio to its floor, then the targets.
//
// Absolute figures (req/s, p50/p99/p999, server CPU) are over all of a cell's rounds together.
// Every ratio (p50 to the floor, throughput against the gRPC path and the sdk-style plugins,
// own work to floor (a), unix socket to TLS) is computed per round, round i of one cell
// against round i of the other, and printed as the median and range over the rounds,
// "1.31x (1.22–1.40)", followed by "n=k" when only k rounds could be compared. With fewer than
// 3 rounds the range is printed but means nothing, and a note says so. Floor (a) is measured
// once, before the rounds, so a ratio to it varies with its other side only. Server CPU is read
// in clock ticks (10 ms); when a slice's is under 20 ticks a note says the own-work ranges are
// coarse.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "floor (a) typed decode+encode of the 5 KiB Pod: %v per op\n", r.DecodeEncodeFloorPerOp.Round(time.Microsecond))
	fmt.Fprintf(w, "sidecar RSS: idle %.1f MiB, peak %.1f MiB\n", mib(r.RSSIdle), mib(r.RSSPeak))
	n := r.rounds()
	fmt.Fprintf(w, "ratios: median (min–max) over %d interleaved rounds (round i: the i-th slice of every workload at that concurrency); req/s, percentiles and CPU over all rounds\n", n)
	if n < 3 {
		fmt.Fprintf(w, "note: only %d round(s): the ranges are not meaningful, use --rounds 3 or more\n", n)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tconc\treqs\terrs\treq/s\tp50\tp99\tp999\tp50 / floor\tserver CPU s/1000\t")
	for _, c := range r.Cells {
		ratio := "-"
		if f, plus, ok := r.floorFor(c); ok {
			ratio = r.formatRatio(perRound(c, f, p50Ratio(plus)))
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
			fmt.Fprintf(w, "concurrency %d: admission https throughput = %s the vcluster-style gRPC path (%.0f vs %.0f req/s)\n", c,
				r.formatRatio(perRound(a, g, throughputRatio)), a.Throughput(), g.Throughput())
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
				fmt.Fprintf(w, "concurrency %d: %s throughput = %s the sdk-style plugin (%.0f vs %.0f req/s)\n", c, p.what,
					r.formatRatio(perRound(o, s, throughputRatio)), o.Throughput(), s.Throughput())
			}
		}
	}
	// Server CPU per mutation, sequential, and the part of it above the same transport's
	// floor (the floor's server answering without work): that part is the server's own work,
	// set against floor (a). The CPU figures are over all rounds; the ratio is per round.
	var smallestCPU time.Duration // the least CPU of a slice in these ratios
	for _, p := range []struct{ name, transport string }{
		{AdmissionHTTPS, FloorHTTPS}, {BridgeGRPC, FloorGRPC}, {SDKGRPC, FloorGRPC}, {SynchookV2, EchoV2}, {SDKV2, EchoV2},
	} {
		c, ok1 := r.Find(p.name, 1)
		f, ok2 := r.Find(p.transport, 1)
		if !ok1 || !ok2 || c.ServerCPU <= 0 || f.ServerCPU <= 0 || r.DecodeEncodeFloorPerOp <= 0 {
			continue
		}
		perOp, transport := c.ServerCPU/time.Duration(max(c.Requests, 1)), f.ServerCPU/time.Duration(max(f.Requests, 1))
		fmt.Fprintf(w, "server CPU per mutation, %s: %v = transport floor %v + own work %v; own work = %s floor (a)\n", p.name,
			perOp.Round(time.Microsecond), transport.Round(time.Microsecond), (perOp - transport).Round(time.Microsecond),
			r.formatRatio(perRound(c, f, ownWorkRatio(r.DecodeEncodeFloorPerOp))))
		for _, x := range slices.Concat(c.rounds(), f.rounds()) {
			if x.ServerCPU > 0 && (smallestCPU == 0 || x.ServerCPU < smallestCPU) {
				smallestCPU = x.ServerCPU
			}
		}
	}
	if tick := time.Second / clockTicks; smallestCPU > 0 && smallestCPU < 20*tick {
		fmt.Fprintf(w, "note: server CPU is read in %v ticks and the smallest slice used %v: the own-work ranges are coarse at these bounds\n", tick, smallestCPU)
	}
	if a, ok := r.Find(AdmissionHTTPS, 1); ok {
		if b, ok := r.Find(FloorHTTPS, 1); ok {
			floor := r.DecodeEncodeFloorPerOp + b.P50
			fmt.Fprintf(w, "sequential admission p50 %v = %s floor (a)+(b) %v\n", us(a.P50),
				r.formatRatio(perRound(a, b, p50Ratio(r.DecodeEncodeFloorPerOp))), us(floor))
		}
	}
	if u, ok := r.Find(AdmissionUnix, 1); ok {
		if a, ok := r.Find(AdmissionHTTPS, 1); ok {
			fmt.Fprintf(w, "sequential unix socket p50 %v = %s TLS over loopback TCP\n", us(u.P50),
				r.formatRatio(perRound(u, a, p50Ratio(0))))
		}
	}
}

// floorFor returns the floor a cell is compared with, at the same concurrency, as a cell and
// a constant added to its p50: (a)+(b) for the admission transports, (c) for the v1 gRPC
// paths, (d) for the v2 plugins.
func (r *Report) floorFor(c Cell) (floor Cell, plus time.Duration, ok bool) {
	switch c.Workload {
	case AdmissionHTTPS, AdmissionUnix:
		b, ok := r.Find(FloorHTTPS, c.Concurrency)
		return b, r.DecodeEncodeFloorPerOp, ok
	case BridgeGRPC, SDKGRPC:
		g, ok := r.Find(FloorGRPC, c.Concurrency)
		return g, 0, ok
	case SynchookV2, SDKV2:
		e, ok := r.Find(EchoV2, c.Concurrency)
		return e, 0, ok
	}
	return Cell{}, 0, false
}

// rounds is the number of rounds the report's ratios are over.
func (r *Report) rounds() int {
	if r.Rounds > 0 {
		return r.Rounds
	}
	n := 0
	for _, c := range r.Cells {
		n = max(n, len(c.rounds()))
	}
	return n
}

// perRound returns ratio of round i of a against round i of b, for every i both have and
// ratio can compute (ok, and a finite value).
func perRound(a, b Cell, ratio func(a, b Round) (float64, bool)) []float64 {
	ar, br := a.rounds(), b.rounds()
	var out []float64
	for i := range min(len(ar), len(br)) {
		if v, ok := ratio(ar[i], br[i]); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	return out
}

// throughputRatio is a's throughput over b's.
func throughputRatio(a, b Round) (float64, bool) {
	if a.Elapsed <= 0 || b.Elapsed <= 0 || b.Requests <= 0 {
		return 0, false
	}
	return a.Throughput() / b.Throughput(), true
}

// p50Ratio returns the ratio of a's p50 to plus + b's p50.
func p50Ratio(plus time.Duration) func(a, b Round) (float64, bool) {
	return func(a, b Round) (float64, bool) {
		if a.Requests <= 0 || b.Requests <= 0 || plus+b.P50 <= 0 {
			return 0, false
		}
		return float64(a.P50) / float64(plus+b.P50), true
	}
}

// ownWorkRatio returns the ratio of a's server CPU per request above b's (its transport's
// floor) to floorA.
func ownWorkRatio(floorA time.Duration) func(a, b Round) (float64, bool) {
	return func(a, b Round) (float64, bool) {
		if a.Requests <= 0 || b.Requests <= 0 || a.ServerCPU <= 0 || b.ServerCPU <= 0 || floorA <= 0 {
			return 0, false
		}
		own := float64(a.ServerCPU)/float64(a.Requests) - float64(b.ServerCPU)/float64(b.Requests)
		return own / float64(floorA), true
	}
}

// formatRatio formats per-round ratios as "median (min–max)", "1.31x (1.22–1.40)", with
// " n=k" appended when k is fewer than the report's rounds, and "-" for none.
func (r *Report) formatRatio(xs []float64) string {
	m, lo, hi, ok := medianRange(xs)
	if !ok {
		return "-"
	}
	s := fmt.Sprintf("%.2fx (%.2f–%.2f)", m, lo, hi)
	if len(xs) < r.rounds() {
		s += fmt.Sprintf(" n=%d", len(xs))
	}
	return s
}

// medianRange returns the median of xs (the mean of the middle two for an even count), their
// minimum and their maximum; ok is false when xs is empty. xs is not modified.
func medianRange(xs []float64) (median, lo, hi float64, ok bool) {
	if len(xs) == 0 {
		return 0, 0, 0, false
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	median = s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return median, s[0], s[n-1], true
}

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }
func mib(b int64) float64       { return float64(b) / (1 << 20) }
