package verify

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The sampler reports what the server's funnel counted during the run, by
// layer, from its /metrics; other labelled series are ignored.
func TestSamplerFunnel(t *testing.T) {
	var admitted, marked atomic.Int64
	admitted.Store(5) // counted before the run: not the run's
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# HELP go_goroutines x\ngo_goroutines 12\ngo_memstats_heap_inuse_bytes 3e+06\n")
		fmt.Fprintf(w, "seckill_purchase_funnel_total{layer=\"admitted\"} %d\n", admitted.Load())
		fmt.Fprintf(w, "seckill_purchase_funnel_total{layer=\"sold_out_mark\"} %d\n", marked.Load())
		fmt.Fprintf(w, "seckill_purchases_total{outcome=\"ACCEPTED\"} 999\n")
	}))
	defer srv.Close()

	s := StartSampler(context.Background(), nil, 0, srv.URL)
	admitted.Add(200)
	marked.Add(800)
	s.Stop()
	st := s.ServerStats()
	if st == nil {
		t.Fatal("no server stats")
	}
	if diff := cmp.Diff(map[string]int64{"admitted": 200, "sold_out_mark": 800}, st.Funnel); diff != "" {
		t.Errorf("funnel (-want +got):\n%s", diff)
	}
	if st.GoroutinesEnd != 12 || st.HeapEndMB != 3 {
		t.Errorf("goroutines %d, heap %.1f MB; want 12 and 3", st.GoroutinesEnd, st.HeapEndMB)
	}
}
