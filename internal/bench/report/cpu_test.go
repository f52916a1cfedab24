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
