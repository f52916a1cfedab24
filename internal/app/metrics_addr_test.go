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

// prodVars makes a test server a production one (SECKILL_ENV=prod with a
// secret of its own).
func prodVars(m map[string]string) {
	m["SECKILL_ENV"] = "prod"
	m["SECKILL_JWT_SECRET"] = strings.Repeat("p", 48)
}

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

// TestMetricsProduction: production never serves /metrics on the API's
// address (with or without credentials, it is not there); with
// SECKILL_METRICS_ADDR it is served on that address.
func TestMetricsProduction(t *testing.T) {
	get := func(url, user, password string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	e := newTestEnv(t, "", prodVars, func(m map[string]string) {
		m["SECKILL_ADMIN_USER"], m["SECKILL_ADMIN_PASSWORD"] = "ops", "a-password-of-the-operator"
	})
	if e.app.Config.Dev() {
		t.Fatal("not a production config")
	}
	for _, c := range []struct{ name, user, password string }{{"anonymous", "", ""}, {"basic auth", "ops", "a-password-of-the-operator"}} {
		if status, body := get(e.url+"/metrics", c.user, c.password); status != http.StatusNotFound || strings.Contains(body, "go_goroutines") {
			t.Errorf("%s: public /metrics in production answered %d: %.200s", c.name, status, body)
		}
	}
	if status, _ := get(e.url+"/healthz", "", ""); status != http.StatusOK {
		t.Errorf("/healthz answered %d", status)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e = newTestEnv(t, "", prodVars, func(m map[string]string) { m["SECKILL_METRICS_ADDR"] = addr })
	if status, body := get(e.url+"/metrics", "", ""); status != http.StatusNotFound || strings.Contains(body, "go_goroutines") {
		t.Errorf("with SECKILL_METRICS_ADDR, the API's address answered /metrics %d", status)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.app.runMetrics(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, 5*time.Second, "metrics on their own address", func() bool {
		status, body := get("http://"+addr+"/metrics", "", "")
		return status == http.StatusOK && strings.Contains(body, "go_goroutines")
	})
}
