package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sampleCPU is a closed-model run's CPU: 5.2 s of server, 1.6 of Redis,
// 1.65 of Postgres and 3.4 of the bench for 40,000 accepted orders, one
// of them not persisted.
func sampleCPU() *CPU {
	c := &CPU{WindowS: 6, TickMs: 10, Units: map[string]int64{UnitAccepted: 40_000, UnitPersisted: 39_999},
		Processes: []ProcessCPU{
			{Name: ProcServer, PIDs: []int{100}, Seconds: 4.4, ErrorS: 0.01},
			{Name: ProcRedis, PIDs: []int{200}, Seconds: 1.6, ErrorS: 0.01},
			{Name: ProcPostgres, PIDs: []int{300}, Seconds: 1.6, ErrorS: 0.08, OtherS: 0.4},
			{Name: ProcBench, PIDs: []int{400}, Seconds: 3.4, ErrorS: 0.01},
		}}
	c.AddSum()
	return c
}

func TestCPUPerUnit(t *testing.T) {
	c := sampleCPU()
	got := map[string][2]float64{}
	for _, p := range c.Processes {
		got[p.Name] = [2]float64{p.PerUnitUs[UnitAccepted], p.PerUnitUs[UnitPersisted]}
	}
	// 4.4 s / 40,000 = 110 µs; the sum is server + Redis + Postgres, the
	// bench apart.
	want := map[string][2]float64{
		ProcServer: {110, 4.4e6 / 39_999}, ProcRedis: {40, 1.6e6 / 39_999}, ProcPostgres: {40, 1.6e6 / 39_999},
		ProcBench: {85, 3.4e6 / 39_999}, ProcSum: {190, 7.6e6 / 39_999},
	}
	approx := cmp.Comparer(func(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 })
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("µs per unit (-want +got):\n%s", diff)
	}
	if sum := c.Process(ProcSum); sum.ErrorS < 0.0999 || sum.ErrorS > 0.1001 {
		t.Errorf("sum's error %v, want 0.10", sum.ErrorS)
	}
	// A process not measured leaves the sum out, saying which.
	c = &CPU{Units: map[string]int64{UnitAccepted: 10}, Processes: []ProcessCPU{
		{Name: ProcServer, Missing: "not this machine"}, {Name: ProcRedis, Seconds: 1}, {Name: ProcPostgres, Seconds: 1}}}
	c.AddSum()
	if s := c.Process(ProcSum); s.Missing != "server not measured" || s.PerUnitUs != nil {
		t.Errorf("sum without the server: %+v", s)
	}
}

func TestCPUText(t *testing.T) {
	res := sampleResult()
	res.Runs[0].CPU = sampleCPU()
	// A burst is too short for 10 ms ticks: its figures are marked.
	res.Runs[1].CPU = &CPU{WindowS: 0.2, TickMs: 10, Units: map[string]int64{UnitAccepted: 200, UnitPersisted: 200},
		Processes: []ProcessCPU{{Name: ProcServer, Missing: "it runs in the bench's process (counted under bench)"},
			{Name: ProcRedis, Missing: NotUsed}, {Name: ProcPostgres, Seconds: 0.05, ErrorS: 0.07}, {Name: ProcBench, Seconds: 0.2, ErrorS: 0.01}}}
	res.Runs[1].CPU.AddSum()
	var b bytes.Buffer
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"CPU window (/proc)", "6.00 s",
		"CPU µs per accepted / persisted",
		"  server ", "110 / 110 ±0.25",
		"  server+Redis+Postgres ", "190 / 190 ±2.50",
		"  bench ", "85.0 / 85.0 ±0.25",
		"~250 / ~250 ±350", // the sync run's Postgres: coarse
		"Postgres, not the run's (s)", "0.40",
		"CPU: utime+stime of each local process from /proc, in clock ticks of 10 ms",
		"cpu sync: server not measured: it runs in the bench's process",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, NotUsed) {
		t.Errorf("the text names a process the run does not use:\n%s", out)
	}
	b.Reset()
	if err := res.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Runs []struct {
			CPU *struct {
				Units     map[string]int64 `json:"units"`
				Processes []struct {
					Name  string             `json:"name"`
					PerUs map[string]float64 `json:"us_per"`
				} `json:"processes"`
			} `json:"cpu"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	c := got.Runs[0].CPU
	if c == nil || c.Units[UnitAccepted] != 40_000 || len(c.Processes) != 5 || c.Processes[4].Name != ProcSum || c.Processes[4].PerUs[UnitAccepted] != 190 {
		t.Errorf("cpu in JSON: %s", b.String())
	}
}

// TestBuildsSummary takes the medians of three rounds of each build, the
// ratio head ÷ base of the medians and of each round, and each process's
// CPU per purchase.
func TestBuildsSummary(t *testing.T) {
	run := func(target string, round int, rps, p99, serverUs float64) *Report {
		c := &CPU{Units: map[string]int64{UnitAccepted: 1000}, Processes: []ProcessCPU{
			{Name: ProcServer, Seconds: serverUs * 1000 / 1e6}, {Name: ProcRedis, Seconds: 0.04}, {Name: ProcPostgres, Seconds: 0.04},
			{Name: ProcBench, Missing: "gone"}}}
		c.AddSum()
		return &Report{Target: target, Round: round, Throughput: rps, Latency: Latency{P50: p99 / 3, P99: p99}, CPU: c}
	}
	l := BuildLoad{Load: LoadInfo{Mode: ModeClosed}, Runs: []*Report{
		run(TargetBase, 1, 10_000, 12, 100), run(TargetHead, 1, 8_000, 18, 120),
		run(TargetBase, 2, 12_000, 10, 90), run(TargetHead, 2, 9_000, 15, 130),
		run(TargetBase, 3, 11_000, 30, 95), run(TargetHead, 3, 9_900, 16, 125),
	}}
	l.Summarize("closed")
	if l.Base.Throughput != 11_000 || l.Head.Throughput != 9_000 || l.Base.P99 != 12 || l.Head.P99 != 16 {
		t.Errorf("medians: base %+v, head %+v", l.Base, l.Head)
	}
	approx := cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })
	if diff := cmp.Diff([]float64{0.8, 0.75, 0.9}, l.RoundRatios, approx); diff != "" {
		t.Errorf("round ratios (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(9_000.0/11_000, l.ThroughputRatio, approx); diff != "" {
		t.Errorf("ratio: %s", diff)
	}
	if diff := cmp.Diff(map[string]float64{ProcServer: 125, ProcRedis: 40, ProcPostgres: 40, ProcSum: 205},
		l.Head.CPUPerAcceptedUs, approx); diff != "" {
		t.Errorf("head's CPU (-want +got):\n%s", diff)
	}
	for _, want := range []string{"closed: head ÷ base throughput 0.82× (medians of 3 rounds; round by round 0.80, 0.75, 0.90)",
		"9,000 vs 11,000 requests/s", "p99 16.0 ms vs 12.0 ms (1.33×)", "server 125 vs 95.0", "server+Redis+Postgres 205 vs 175"} {
		if !strings.Contains(l.Text, want) {
			t.Errorf("summary lacks %q:\n%s", want, l.Text)
		}
	}
	res := &Result{Builds: &Builds{BaseBinary: "base/seckill", HeadBinary: "bin/seckill", Rounds: 3, Loads: []BuildLoad{l}}}
	if got := len(res.AllRuns()); got != 6 {
		t.Errorf("AllRuns: %d runs", got)
	}
	var b bytes.Buffer
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HEAD bin/seckill against BASE base/seckill, 3 rounds", "base #1", "head #3", l.Text} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
