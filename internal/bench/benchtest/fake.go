// Package benchtest holds what the bench's tests share: a fake GraphQL
// server that answers the bench's few operations like seckill, in memory.
package benchtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/auth"
)

// Secret signs the fake server's tokens.
const Secret = "bench-test-secret-that-is-long-enough-0123456789"

// FakeServer is a GraphQL endpoint that answers the bench's few
// operations like seckill, in memory: the first stock distinct buyers are
// ACCEPTED, the rest SOLD_OUT or ALREADY_PURCHASED.
type FakeServer struct {
	*httptest.Server
	tokens *auth.Tokens
	delay  time.Duration // before each purchase answer

	Purchases   atomic.Int64
	MaxParallel atomic.Int64 // most purchases answered at once
	concurrent  atomic.Int64

	mu       sync.Mutex
	stock    int64
	arrivals []time.Time
	buyers   map[int64]int64 // user -> order id
}

// NewFakeServer starts a FakeServer that waits delay before each purchase
// answer and accepts tokens signed with Secret.
func NewFakeServer(t *testing.T, delay time.Duration) *FakeServer {
	t.Helper()
	f := &FakeServer{tokens: auth.NewTokens([]byte(Secret), "seckill"), delay: delay, buyers: map[int64]int64{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *FakeServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		fmt.Fprint(w, `{"data":{"__typename":"Query"}}`)
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	u, err := f.tokens.Parse(token)
	if !ok || err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"errors":[{"message":"invalid token","extensions":{"code":"UNAUTHENTICATED"}}]}`)
		return
	}
	var req struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	switch q := req.Query; {
	case strings.Contains(q, "addSeckillVoucher"):
		in := req.Variables["input"].(map[string]any)
		f.mu.Lock()
		f.stock = int64(in["stock"].(float64))
		f.mu.Unlock()
		fmt.Fprint(w, `{"data":{"addSeckillVoucher":{"id":"7"}}}`)
	case strings.Contains(q, "seckill(voucherId"):
		f.Purchases.Add(1)
		storeMax(&f.MaxParallel, f.concurrent.Add(1))
		defer f.concurrent.Add(-1)
		f.mu.Lock()
		f.arrivals = append(f.arrivals, time.Now())
		f.mu.Unlock()
		if f.delay > 0 {
			select {
			case <-time.After(f.delay):
			case <-r.Context().Done():
				return
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.buyers[u.ID]; ok {
			fmt.Fprint(w, `{"data":{"seckill":{"outcome":"ALREADY_PURCHASED","orderId":null}}}`)
			return
		}
		if int64(len(f.buyers)) >= f.stock {
			fmt.Fprint(w, `{"data":{"seckill":{"outcome":"SOLD_OUT","orderId":null}}}`)
			return
		}
		id := 7<<32 | int64(len(f.buyers)+1)
		f.buyers[u.ID] = id
		fmt.Fprintf(w, `{"data":{"seckill":{"outcome":"ACCEPTED","orderId":"%d"}}}`, id)
	case strings.Contains(q, "voucher(id"):
		f.mu.Lock()
		sold := int64(len(f.buyers))
		st := f.stock
		f.mu.Unlock()
		status := "ACTIVE"
		if sold >= st {
			status = "SOLD_OUT"
		}
		fmt.Fprintf(w, `{"data":{"voucher":{"seckill":{"stock":%d,"remaining":%d,"sold":%d,"status":%q}}}}`, st, st-sold, sold, status)
	case strings.Contains(q, "myOrders"):
		fmt.Fprint(w, `{"data":{"myOrders":[]}}`)
	case strings.Contains(q, "__typename"):
		fmt.Fprint(w, `{"data":{"__typename":"Query"}}`)
	default:
		fmt.Fprint(w, `{"errors":[{"message":"unknown operation"}]}`)
	}
}

// SetStock sets the units the fake sells, as creating a campaign does.
func (f *FakeServer) SetStock(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stock = n
}

// Arrivals returns when each purchase arrived.
func (f *FakeServer) Arrivals() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.arrivals)
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// Tokens returns "Bearer <token>" headers for n users from 1, signed with
// Secret.
func Tokens(t *testing.T, n int) []string {
	t.Helper()
	tokens := auth.NewTokens([]byte(Secret), "seckill")
	out := make([]string, n)
	for i := range out {
		tok, err := tokens.Issue(int64(i+1), false, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = "Bearer " + tok
	}
	return out
}
