package admission_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"seckill/internal/admission"
)

// TestRedisLog: a burst of go-redis lines of one kind logs one line, and the
// next after the interval counts the ones held back; another kind is logged
// at once.
func TestRedisLog(t *testing.T) {
	var buf bytes.Buffer
	l := admission.NewRedisLog(slog.New(slog.NewTextHandler(&buf, nil)), 10*time.Second)
	now := time.Unix(1_700_000_000, 0)
	admission.SetRedisLogClock(l, func() time.Time { return now })
	ctx := context.Background()
	const dial = "redis: connection pool: failed to dial after %d attempts: %v"
	for range 500 {
		l.Printf(ctx, dial, 5, "connection refused")
	}
	l.Printf(nil, "redis: cluster: %s", "reload slots")
	now = now.Add(10 * time.Second)
	l.Printf(ctx, dial, 5, "connection refused")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines; want 3:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{
		`level=WARN msg="connection pool: failed to dial after 5 attempts: connection refused" component=go-redis`,
		`msg="cluster: reload slots" component=go-redis`,
		`msg="connection pool: failed to dial after 5 attempts: connection refused" component=go-redis repeated=499`,
	} {
		if !strings.Contains(lines[i], want) || strings.Count(lines[i], "repeated") > strings.Count(want, "repeated") {
			t.Errorf("line %d: %s\nwant it to hold %s", i, lines[i], want)
		}
	}
}

// TestRedisLogKindsBounded: the kinds RedisLog tells apart are bounded, so
// format strings past the bound (none of go-redis's) share one kind and
// one line per interval.
func TestRedisLogKindsBounded(t *testing.T) {
	var buf bytes.Buffer
	l := admission.NewRedisLog(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	for i := range 200 {
		l.Printf(context.Background(), strings.Repeat("x", i+1)+" %d", i)
	}
	if n := strings.Count(buf.String(), "\n"); n != 64 {
		t.Errorf("%d lines for 200 kinds; want 64 (63 kinds, and one line of the rest)", n)
	}
}
