package bench

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/bench/report"
)

func TestMasterLoads(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_evalsha:calls=1200,usec=3000,usec_per_call=2.5,rejected_calls=0,failed_calls=0\r\ncmdstat_eval:calls=3,usec=9\r\ncmdstat_get:calls=7\r\n# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\n"
	if got, want := parseMasterInfo(info), (masterStat{scripts: 1203, cpuS: 3.75}); got != want {
		t.Errorf("parseMasterInfo = %+v, want %+v", got, want)
	}
	got := masterLoads(map[string]masterStat{"b:2": {scripts: 100, cpuS: 1}, "a:1": {scripts: 0}},
		map[string]masterStat{"a:1": {scripts: 300, cpuS: 0.5}, "b:2": {scripts: 200, cpuS: 1.25}})
	want := []report.MasterLoad{{Addr: "a:1", Scripts: 300, Share: 0.75, CPUS: 0.5}, {Addr: "b:2", Scripts: 100, Share: 0.25, CPUS: 0.25}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("masterLoads (-want +got):\n%s", diff)
	}
	if b := report.Busiest(got); b == nil || b.Addr != "a:1" {
		t.Errorf("busiest %+v", b)
	}
}
