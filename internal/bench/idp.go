package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"seckill/internal/auth/idp"
)

// Token algorithms --token-alg names: our HS256 tokens (signed with the
// server's secret), or an identity provider's RS256 or ES256 tokens from
// the bench's own provider.
const (
	TokenHS256 = "hs256"
	TokenRS256 = "rs256"
	TokenES256 = "es256"
)

// Defaults of the bench's identity provider: where it listens and the
// audience its tokens carry. The server under test trusts it with
// SECKILL_AUTH_JWKS_URL=http://127.0.0.1:8099/jwks
// SECKILL_AUTH_ISSUER=http://127.0.0.1:8099 SECKILL_AUTH_AUDIENCE=seckill-bench.
const (
	DefaultIdPAddr     = "127.0.0.1:8099"
	DefaultIdPAudience = "seckill-bench"
)

// providerAlgs are the provider's algorithms, by --token-alg name.
var providerAlgs = map[string]jose.SignatureAlgorithm{TokenRS256: jose.RS256, TokenES256: jose.ES256}

// benchIdP is the bench's identity provider: a discovery document and a
// key set on IdPAddr, with a fresh key per algorithm each run (the server
// fetches the set again for the new kids).
type benchIdP struct {
	p   *idp.IdP
	srv *http.Server
	run string // this run's key ids' suffix
}

func startIdP(addr string) (*benchIdP, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--idp-addr %s: the bench's identity provider cannot listen: %w", addr, err)
	}
	b := &benchIdP{p: idp.New("http://" + addr), run: strconv.FormatInt(time.Now().UnixNano(), 36)}
	for name, alg := range providerAlgs {
		if _, err := b.p.AddNew(b.kid(name), alg); err != nil {
			ln.Close()
			return nil, err
		}
	}
	b.srv = &http.Server{Handler: b.p, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

func (b *benchIdP) kid(alg string) string { return "bench-" + alg + "-" + b.run }

func (b *benchIdP) close() { _ = b.srv.Close() }

// subject is the provider's subject of the bench's user id: a string, as
// a provider's are; the server gives it a user id of its own.
func subject(userID int64) string { return "bench-user-" + strconv.FormatInt(userID, 10) }

// mint signs a token of alg for each of n users from userLo, on every
// core: "Bearer <token>" by user index.
func (b *benchIdP) mint(ctx context.Context, alg, audience string, userLo int64, n int, ttl time.Duration) ([]string, error) {
	out := make([]string, n)
	workers := min(runtime.GOMAXPROCS(0), max(n/100, 1))
	errs := make([]error, workers)
	now := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if i%256 == 0 && ctx.Err() != nil {
					errs[w] = ctx.Err()
					return
				}
				t, err := b.p.Sign(b.kid(alg), idp.Claims{Subject: subject(userLo + int64(i)), Audience: []string{audience},
					IssuedAt: now, Expiry: now.Add(ttl)})
				if err != nil {
					errs[w] = err
					return
				}
				out[i] = "Bearer " + t
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// providerPreflight waits until the server accepts the provider's tokens
// of alg: its key set may be up to SECKILL_AUTH_MIN_REFETCH from fetching
// the new kid.
func (r *runner) providerPreflight(ctx context.Context, alg string) error {
	tok, err := r.idp.mint(ctx, alg, r.cfg.IdPAudience, r.userLo-2, 1, time.Hour)
	if err != nil {
		return err
	}
	c := newControlClient(r.cfg.URL, strings.TrimPrefix(tok[0], "Bearer "))
	deadline := time.Now().Add(20 * time.Second)
	for {
		var orders struct {
			MyOrders []struct{ ID string } `json:"myOrders"`
		}
		err := c.do(ctx, `query { myOrders { id } }`, nil, &orders)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			addr := r.cfg.IdPAddr
			return fmt.Errorf("--token-alg %s: the server at %s does not accept the bench's identity provider's tokens (%v); "+
				"run it with SECKILL_AUTH_JWKS_URL=http://%s/jwks SECKILL_AUTH_ISSUER=http://%s SECKILL_AUTH_AUDIENCE=%s",
				alg, r.cfg.URL, err, addr, addr, r.cfg.IdPAudience)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}
