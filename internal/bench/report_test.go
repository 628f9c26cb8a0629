package bench

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedianRange(t *testing.T) {
	for _, tc := range []struct {
		name           string
		xs             []float64
		median, lo, hi float64
	}{
		{"one", []float64{1.3}, 1.3, 1.3, 1.3},
		{"odd", []float64{1.4, 1.2, 1.3}, 1.3, 1.2, 1.4},
		{"odd, five", []float64{5, 1, 4, 2, 3}, 3, 1, 5},
		{"even", []float64{1.4, 1.1, 1.2, 1.3}, 1.25, 1.1, 1.4},
		{"even, two", []float64{2, 1}, 1.5, 1, 2},
		{"even, equal middle", []float64{3, 2, 2, 1}, 2, 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.xs)
			m, lo, hi, ok := medianRange(in)
			if !ok || !near(m, tc.median) || lo != tc.lo || hi != tc.hi {
				t.Errorf("medianRange(%v) = %v (%v–%v) ok=%v, want %v (%v–%v)", tc.xs, m, lo, hi, ok, tc.median, tc.lo, tc.hi)
			}
			if !slices.Equal(in, tc.xs) {
				t.Errorf("medianRange changed its input: %v, was %v", in, tc.xs)
			}
		})
	}
	if _, _, _, ok := medianRange(nil); ok {
		t.Error("medianRange(nil): ok")
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// cellOf builds a cell whose aggregate fields are its rounds summed, with p50 the rounds' middle.
func cellOf(workload string, conc int, rounds ...Round) Cell {
	c := Cell{Workload: workload, Concurrency: conc, Rounds: rounds}
	for _, r := range rounds {
		c.Requests += r.Requests
		c.Errors += r.Errors
		c.Elapsed += r.Elapsed
		c.ServerCPU += r.ServerCPU
	}
	c.P50 = rounds[len(rounds)/2].P50
	c.P99, c.P999 = 2*c.P50, 3*c.P50
	return c
}

// rnd is a round of n requests in one second, with p50 p50µs and cpuµs of server CPU.
func rnd(n int, p50, cpu time.Duration) Round {
	return Round{Requests: n, Elapsed: time.Second, P50: p50 * time.Microsecond, ServerCPU: cpu * time.Microsecond}
}

func printed(r *Report) string {
	var b bytes.Buffer
	r.Print(&b)
	return b.String()
}

func TestPrintPerRoundRatios(t *testing.T) {
	rep := &Report{
		DecodeEncodeFloorPerOp: 100 * time.Microsecond,
		Rounds:                 3,
		Cells: []Cell{
			// floor (b): p50 100µs, 100µs of CPU per request, 10 req/s in every round.
			cellOf(FloorHTTPS, 1, rnd(10, 100, 1000), rnd(10, 100, 1000), rnd(10, 100, 1000)),
			// p50 / (a)+(b) = 1.1, 1.5, 2.0; own CPU = (200, 300, 250) - 100 µs = 1.0, 2.0, 1.5 × (a).
			cellOf(AdmissionHTTPS, 1, rnd(10, 220, 2000), rnd(10, 300, 3000), rnd(10, 400, 2500)),
			// p50 against admission https: 0.5, 1.0, 0.25; against (a)+(b): 0.55, 1.5, 0.5.
			cellOf(AdmissionUnix, 1, rnd(10, 110, 2000), rnd(10, 300, 3000), rnd(10, 100, 2500)),
			cellOf(FloorGRPC, 1, rnd(8, 1000, 8000), rnd(8, 1000, 8000), rnd(8, 1000, 8000)),
			// admission https throughput over it: 1.67, 2.5, 5.
			cellOf(BridgeGRPC, 1, rnd(6, 2000, 10000), rnd(4, 2500, 8000), rnd(2, 3000, 4000)),
			// the bridge's throughput over it: 1.5, 1, -: its third round has no requests, so
			// the ratios with it are over two rounds.
			cellOf(SDKGRPC, 1, rnd(4, 3000, 12000), rnd(4, 3000, 12000), Round{Elapsed: time.Second}),
			cellOf(EchoV2, 16, rnd(30, 500, 9000), rnd(30, 500, 9000), rnd(30, 500, 9000)),
			// throughput over sdk-style: 1.2, 1.4, 1.3.
			cellOf(SynchookV2, 16, rnd(24, 700, 9600), rnd(28, 600, 11200), rnd(26, 650, 10400)),
			cellOf(SDKV2, 16, rnd(20, 900, 12000), rnd(20, 900, 12000), rnd(20, 900, 12000)),
		},
	}
	out := printed(rep)
	t.Log("\n" + out)
	for _, want := range []string{
		"ratios: median (min–max) over 3 interleaved rounds",
		"concurrency 1: admission https throughput = 2.50x (1.67–5.00) the vcluster-style gRPC path (10 vs 4 req/s)",
		"concurrency 1: v1: bridge throughput = 1.25x (1.00–1.50) n=2 the sdk-style plugin (4 vs 3 req/s)",
		"concurrency 16: v2: synchook throughput = 1.30x (1.20–1.40) the sdk-style plugin (26 vs 20 req/s)",
		"concurrency 16: v2: echo floor throughput = 1.50x (1.50–1.50) the sdk-style plugin (30 vs 20 req/s)",
		"server CPU per mutation, " + AdmissionHTTPS + ": 250µs = transport floor 100µs + own work 150µs; own work = 1.50x (1.00–2.00) floor (a)",
		"sequential admission p50 300µs = 1.50x (1.10–2.00) floor (a)+(b) 200µs",
		"sequential unix socket p50 300µs = 0.50x (0.25–1.00) TLS over loopback TCP",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(out, "note: only") {
		t.Error("a note on too few rounds with 3 rounds")
	}
	if !strings.Contains(out, "note: server CPU is read in 10ms ticks and the smallest slice used 1ms") {
		t.Error("no note on CPU slices below 20 ticks")
	}
	// The table: aggregate absolute columns, then the per-round p50 ratio to the floor.
	for workload, want := range map[string][]string{
		AdmissionHTTPS: {"30", "0", "10", "300µs", "600µs", "900µs", "1.50x (1.10–2.00)", "0.250"},
		SDKGRPC:        {"8", "0", "3", "3000µs", "6000µs", "9000µs", "3.00x (3.00–3.00) n=2", "3.000"},
		AdmissionUnix:  {"30", "0", "10", "300µs", "600µs", "900µs", "0.55x (0.50–1.50)", "0.250"},
		SynchookV2:     {"78", "0", "26", "600µs", "1200µs", "1800µs", "1.30x (1.20–1.40)", "0.400"},
		FloorHTTPS:     {"30", "0", "10", "100µs", "200µs", "300µs", "-", "0.100"},
	} {
		row := rowOf(t, out, workload)
		if !strings.HasSuffix(strings.Join(strings.Fields(row), " "), strings.Join(want, " ")) {
			t.Errorf("row %q, want it to end in %q", row, strings.Join(want, " "))
		}
	}
}

func rowOf(t *testing.T, out, workload string) string {
	t.Helper()
	for line := range strings.Lines(out) {
		if strings.HasPrefix(strings.TrimSpace(line), workload) {
			return line
		}
	}
	t.Fatalf("no row for %q", workload)
	return ""
}

func TestPrintFewRounds(t *testing.T) {
	// Two rounds: printed, with a note. A cell without per-round data is its own only round.
	rep := &Report{
		DecodeEncodeFloorPerOp: 100 * time.Microsecond,
		Rounds:                 2,
		Cells: []Cell{
			cellOf(FloorGRPC, 1, rnd(8, 1000, 8000), rnd(8, 1000, 8000)),
			cellOf(BridgeGRPC, 1, rnd(5, 2000, 10000), rnd(4, 1500, 8000)),
			{Workload: SDKGRPC, Concurrency: 1, Requests: 4, Elapsed: time.Second, P50: 3 * time.Millisecond, ServerCPU: 12 * time.Millisecond},
		},
	}
	out := printed(rep)
	t.Log("\n" + out)
	for _, want := range []string{
		"note: only 2 round(s): the ranges are not meaningful",
		"1.75x (1.50–2.00)", // the bridge's p50 / floor (c)
		"concurrency 1: v1: bridge throughput = 1.25x (1.25–1.25) n=1 the sdk-style plugin",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestRunKeepsRounds(t *testing.T) {
	var r run
	us := func(xs ...int) []time.Duration {
		var d []time.Duration
		for _, x := range xs {
			d = append(d, time.Duration(x)*time.Microsecond)
		}
		return d
	}
	r.add(run{latencies: us(30, 10, 20), errors: 1, elapsed: time.Second, serverCPU: time.Millisecond})
	r.add(run{latencies: us(50, 40, 60, 70), elapsed: 2 * time.Second, serverCPU: 3 * time.Millisecond})
	c := r.cell("w", 4)
	want := []Round{
		{Requests: 3, Errors: 1, Elapsed: time.Second, P50: 20 * time.Microsecond, ServerCPU: time.Millisecond},
		{Requests: 4, Elapsed: 2 * time.Second, P50: 60 * time.Microsecond, ServerCPU: 3 * time.Millisecond},
	}
	if !slices.Equal(c.Rounds, want) {
		t.Errorf("rounds %+v, want %+v", c.Rounds, want)
	}
	if c.Requests != 7 || c.Errors != 1 || c.Elapsed != 3*time.Second || c.ServerCPU != 4*time.Millisecond || c.P50 != 40*time.Microsecond || c.P99 != 70*time.Microsecond {
		t.Errorf("aggregate %+v", c)
	}
}
