package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMetricsAddress: /metrics is on the API's address unless
// SECKILL_METRICS_ADDR gives it one of its own, and then only there.
func TestMetricsAddress(t *testing.T) {
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	e := newTestEnv(t, "")
	if status, body := get(e.url + "/metrics"); status != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("default: /metrics answered %d: %.200s", status, body)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e = newTestEnv(t, "", func(m map[string]string) { m["SECKILL_METRICS_ADDR"] = addr })
	if status, body := get(e.url + "/metrics"); status == http.StatusOK && strings.Contains(body, "go_goroutines") {
		t.Errorf("with SECKILL_METRICS_ADDR, the API's address still serves /metrics")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.app.runMetrics(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, 5*time.Second, "metrics on their own address", func() bool {
		status, body := get("http://" + addr + "/metrics")
		return status == http.StatusOK && strings.Contains(body, "go_goroutines")
	})
}
