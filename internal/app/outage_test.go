package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"seckill/internal/testenv"
)

// TestOutageLog: thousands of failures from concurrent workers during an
// outage make one line when it starts and one when it ends, with the count.
func TestOutageLog(t *testing.T) {
	logs := &testenv.LogBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	o := newOutageLog(logger, "persist orders")
	ctx := context.Background()
	o.ok(ctx) // healthy: nothing to say

	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			for range 100 {
				o.fail(ctx, errors.New("dial tcp 127.0.0.1:5432: connection refused"))
			}
		})
	}
	wg.Wait()
	o.ok(ctx)
	o.ok(ctx)

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), logs.String())
	}
	if !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "connection refused") {
		t.Errorf("first line: %s", lines[0])
	}
	if !strings.Contains(lines[1], "recovered") || !strings.Contains(lines[1], "failures=20000") {
		t.Errorf("last line: %s", lines[1])
	}
}

// TestPeriodicStepFailures: the reconciler's steps fail on every pass while
// Postgres is away (several passes a second in every process); each step
// logs one line when its failures start and one when they end, and a pass
// cut short by shutdown logs nothing.
func TestPeriodicStepFailures(t *testing.T) {
	logs := &testenv.LogBuffer{}
	a := &App{Logger: slog.New(slog.NewTextHandler(logs, nil))}
	ctx := context.Background()
	away := errors.New(`database "seckill" is not currently accepting connections`)
	for range 50 {
		if a.passed(ctx, "sweep orders", away) || a.passed(ctx, "restore campaigns", away) {
			t.Fatal("a failed pass reported as passed")
		}
	}
	if !a.passed(ctx, "sweep orders", nil) || !a.passed(ctx, "sweep orders", nil) {
		t.Fatal("a pass reported as failed")
	}
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	a.passed(stopped, "reconcile admissions", context.Canceled)

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	want := []string{"sweep orders failing", "restore campaigns failing", "sweep orders recovered"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %s; want %q", i, lines[i], w)
		}
	}
	if !strings.Contains(lines[2], "failures=50") {
		t.Errorf("recovery line: %s; want failures=50", lines[2])
	}
}
