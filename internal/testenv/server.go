package testenv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// App is a seckill process built for a test: internal/app's *App. The
// helper takes it as an interface so that internal/app's own tests can use
// it without an import cycle.
type App interface {
	Handler(ready *atomic.Bool) http.Handler
	RunWorker(ctx context.Context) error
	Close()
}

// Server is an App serving its HTTP API on a test server.
type Server struct {
	URL  string           // base URL, without a path
	HTTP *httptest.Server // the test server
	Ctx  context.Context  // the App's context; it ends at cleanup
	wg   sync.WaitGroup   // the workers
	once sync.Once        // StartWorker
	tb   testing.TB       // for the workers' errors
	run  func(context.Context) error
}

// ServerVars returns the SECKILL_* variables of a test server on the
// database dsn and the Redis at redisURL (on the test cluster, when
// ClusterAddrs is set: redisURL's database has no meaning there):
// development mode, quiet logs, a short shutdown, a patient Redis timeout.
// Callers add their own before config.Load.
func ServerVars(dsn, redisURL string) map[string]string {
	m := map[string]string{
		"SECKILL_ENV":              "dev",
		"SECKILL_DATABASE_URL":     dsn,
		"SECKILL_REDIS_URL":        redisURL,
		"SECKILL_SHUTDOWN_TIMEOUT": "5s",
		"SECKILL_LOG_LEVEL":        "warn",
		"SECKILL_REDIS_TIMEOUT":    "10s", // a shared, loaded machine: a slow answer is no fault here
		// Every test client is 127.0.0.1: one address for thousands of
		// buyers. Tests of the per-address limit set their own.
		"SECKILL_ADDRESS_RATE": "0",
	}
	if addrs := ClusterAddrs(); len(addrs) > 0 {
		delete(m, "SECKILL_REDIS_URL")
		m["SECKILL_REDIS_CLUSTER_ADDRS"] = strings.Join(addrs, ",")
	}
	return m
}

// StartServer builds an App with build, given a context that ends at
// cleanup, and serves its handler on a test server. At cleanup it closes
// the server, ends the context, waits for the workers and closes the App.
func StartServer[A App](tb testing.TB, build func(ctx context.Context) (A, error)) (A, *Server) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := build(ctx)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler(nil))
	s := &Server{URL: srv.URL, HTTP: srv, Ctx: ctx, tb: tb, run: a.RunWorker}
	tb.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		s.wg.Wait()
		a.Close()
	})
	return a, s
}

// StartWorker runs the App's persistence workers until cleanup; calls after
// the first do nothing.
func (s *Server) StartWorker() {
	s.once.Do(func() {
		s.Go(func(ctx context.Context) {
			if err := s.run(ctx); err != nil {
				s.tb.Errorf("worker: %v", err)
			}
		})
	})
}

// Go runs f with the App's context; cleanup waits for it to return.
func (s *Server) Go(f func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(s.Ctx)
	}()
}
