package salepage

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"seckill/internal/seckill"
)

// Vouchers reads a voucher for the sale's answers (*seckill.Catalog).
type Vouchers interface {
	// Voucher returns the voucher with its campaign's live stock;
	// ENOTFOUND for an unknown one.
	Voucher(ctx context.Context, id int64) (*seckill.Voucher, error)
}

// SaleCache is how long a browser or CDN may keep an answer of
// GET /sale/{id}/stock or /campaign: every open page asks for the stock
// every few seconds and every page load for the campaign, so a CDN
// answers nearly all of them.
const SaleCache = "public, max-age=2"

// SaleTTL is how long a process keeps a voucher's answers: one domain read
// per voucher and SaleTTL per process, however many ask, for both.
const SaleTTL = time.Second

// maxSaleEntries bounds the cache: ids are the caller's choice, and past
// it answers are read (still one at a time per voucher) but not kept.
const maxSaleEntries = 10000

// saleReadTimeout bounds one domain read, which serves every caller
// waiting for it rather than the one whose request started it.
const saleReadTimeout = 5 * time.Second

// answer is one answer ready to send, the same bytes for everyone.
type answer struct {
	code int
	body []byte
}

// answers are a voucher's answers from one read: the stock and the
// campaign, so that pages asking for both cost one read.
type answers struct {
	stock, campaign answer
}

type saleEntry struct {
	at  time.Time
	ans answers
}

// sales answers vouchers' stock and campaign from a cache of SaleTTL.
type sales struct {
	vouchers Vouchers
	logger   *slog.Logger
	now      func() time.Time
	currency string // the payments' currency, for prices

	mu     sync.Mutex
	cache  map[int64]saleEntry
	flight singleflight.Group
}

func newSales(v Vouchers, logger *slog.Logger, now func() time.Time) *sales {
	return &sales{vouchers: v, logger: logger, now: now, currency: seckill.DefaultCurrency, cache: map[int64]saleEntry{}}
}

func (s *sales) cached(id int64) (answers, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.cache[id]
	if !ok || s.now().Sub(e.at) >= SaleTTL {
		return answers{}, false
	}
	return e.ans, true
}

// get answers voucher id: from the cache, or from the one domain read in
// flight for it.
func (s *sales) get(ctx context.Context, id int64) answers {
	if a, ok := s.cached(id); ok {
		return a
	}
	v, _, _ := s.flight.Do(strconv.FormatInt(id, 10), func() (any, error) {
		if a, ok := s.cached(id); ok { // filled while this caller queued
			return a, nil
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saleReadTimeout)
		defer cancel()
		a := s.read(rctx, id)
		s.keep(id, a)
		return a, nil
	})
	return v.(answers)
}

func (s *sales) read(ctx context.Context, id int64) answers {
	v, err := s.vouchers.Voucher(ctx, id)
	switch {
	case seckill.ErrorCode(err) == seckill.ENOTFOUND, err == nil && v.Campaign == nil:
		a := answer{http.StatusNotFound, []byte(`{"error":"no sale for this voucher"}` + "\n")}
		return answers{a, a}
	case err != nil:
		s.logger.ErrorContext(ctx, "sale page answers", "voucher_id", id, "err", err)
		a := answer{http.StatusServiceUnavailable, []byte(`{"error":"unavailable"}` + "\n")}
		return answers{a, a}
	}
	now := s.now()
	c := toCampaign(v, s.currency, now)
	st := toStock(v.Campaign, now)
	st.Rev = c.Rev
	return answers{stock: ok(st), campaign: ok(c)}
}

func ok(v any) answer {
	b, _ := json.Marshal(v) // plain structs: cannot fail
	return answer{http.StatusOK, append(b, '\n')}
}

// keep caches answers, failures too, so a struggling store is asked once
// a second per voucher however many pages retry.
func (s *sales) keep(id int64, a answers) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.cache) >= maxSaleEntries {
		for k, e := range s.cache {
			if now.Sub(e.at) >= SaleTTL {
				delete(s.cache, k)
			}
		}
		if len(s.cache) >= maxSaleEntries {
			return
		}
	}
	s.cache[id] = saleEntry{at: now, ans: a}
}

// serve answers GET {prefix}/{id}/stock or /campaign (pick chooses which)
// for an id that isID accepted.
func (s *sales) serve(w http.ResponseWriter, r *http.Request, rawID string, pick func(answers) answer) {
	id, ok := parseID(rawID)
	if !ok {
		http.NotFound(w, r)
		return
	}
	a := pick(s.get(r.Context(), id))
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	if a.code == http.StatusServiceUnavailable {
		hdr.Set("Cache-Control", "no-store")
		hdr.Set("Retry-After", "1")
	} else {
		hdr.Set("Cache-Control", SaleCache)
	}
	w.WriteHeader(a.code)
	_, _ = w.Write(a.body)
}
