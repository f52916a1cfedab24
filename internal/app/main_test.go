package app_test

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
)

// TestMain stops the chromium the browser tests share (newBrowser) once
// every test has run. go-redis's own lines go to stderr as the servers'
// do (NewLogger), one of a kind every few seconds: the fault tests'
// outages would print one for every failed dial.
func TestMain(m *testing.M) {
	redis.SetLogger(admission.NewRedisLog(slog.New(slog.NewTextHandler(os.Stderr, nil)), 5*time.Second))
	defer chromiums.Close()
	m.Run()
}
