package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/auth"
)

const testSecret = "bench-test-secret-that-is-long-enough-0123456789"

// fakeServer is a GraphQL endpoint that answers the bench's few
// operations like seckill, in memory: the first stock distinct buyers are
// ACCEPTED, the rest SOLD_OUT or ALREADY_PURCHASED.
type fakeServer struct {
	*httptest.Server
	tokens *auth.Tokens
	delay  time.Duration // before each purchase answer
	stock  int64

	purchases   atomic.Int64
	concurrent  atomic.Int64
	maxParallel atomic.Int64
	mu          sync.Mutex
	arrivals    []time.Time
	buyers      map[int64]int64 // user -> order id
}

func newFakeServer(t *testing.T, delay time.Duration) *fakeServer {
	t.Helper()
	f := &fakeServer{tokens: auth.NewTokens([]byte(testSecret), "seckill"), delay: delay, buyers: map[int64]int64{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		fmt.Fprint(w, `{"data":{"__typename":"Query"}}`)
		return
	}
	u, err := f.tokens.Parse(auth.FromHeader(r.Header.Get("Authorization")))
	if err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"errors":[{"message":"invalid token","extensions":{"code":"UNAUTHENTICATED"}}]}`)
		return
	}
	var req gqlRequest
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
		f.purchases.Add(1)
		storeMax(&f.maxParallel, f.concurrent.Add(1))
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

// testTokens returns auth headers for n users from 1.
func testTokens(t *testing.T, n int) []string {
	t.Helper()
	out, err := mintTokens(t.Context(), auth.NewTokens([]byte(testSecret), "seckill"), 1, n, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
