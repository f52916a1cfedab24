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

// Vouchers reads a voucher for the stock endpoint (*seckill.Catalog).
type Vouchers interface {
	// Voucher returns the voucher with its campaign's live stock;
	// ENOTFOUND for an unknown one.
	Voucher(ctx context.Context, id int64) (*seckill.Voucher, error)
}

// StockCache is how long a browser or CDN may keep a stock answer: every
// open page asks every few seconds, so a CDN answers nearly all of them.
const StockCache = "public, max-age=2"

// StockTTL is how long a process keeps a voucher's stock: one domain read
// per voucher and StockTTL per process, however many ask.
const StockTTL = time.Second

// maxStockEntries bounds the stock cache: ids are the caller's choice, and
// past it answers are read (still one at a time per voucher) but not kept.
const maxStockEntries = 10000

// stockReadTimeout bounds one domain read, which serves every caller
// waiting for it rather than the one whose request started it.
const stockReadTimeout = 5 * time.Second

// Stock is the answer of GET /sale/{voucherId}/stock.
type Stock struct {
	Stock     int64                  `json:"stock"`     // every unit ever put on sale
	Remaining int64                  `json:"remaining"` // units left now
	Status    seckill.CampaignStatus `json:"status"`    // when it was read
}

// stockAnswer is one answer ready to send, the same bytes for everyone.
type stockAnswer struct {
	code int
	body []byte
}

type stockEntry struct {
	at  time.Time
	ans stockAnswer
}

// stocks answers the stock of vouchers from a cache of StockTTL.
type stocks struct {
	vouchers Vouchers
	logger   *slog.Logger
	now      func() time.Time

	mu     sync.Mutex
	cache  map[int64]stockEntry
	flight singleflight.Group
}

func newStocks(v Vouchers, logger *slog.Logger, now func() time.Time) *stocks {
	return &stocks{vouchers: v, logger: logger, now: now, cache: map[int64]stockEntry{}}
}

func (s *stocks) cached(id int64) (stockAnswer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.cache[id]
	if !ok || s.now().Sub(e.at) >= StockTTL {
		return stockAnswer{}, false
	}
	return e.ans, true
}

// get answers voucher id's stock: from the cache, or from the one domain
// read in flight for it.
func (s *stocks) get(ctx context.Context, id int64) stockAnswer {
	if a, ok := s.cached(id); ok {
		return a
	}
	v, _, _ := s.flight.Do(strconv.FormatInt(id, 10), func() (any, error) {
		if a, ok := s.cached(id); ok { // filled while this caller queued
			return a, nil
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stockReadTimeout)
		defer cancel()
		a := s.read(rctx, id)
		s.keep(id, a)
		return a, nil
	})
	return v.(stockAnswer)
}

func (s *stocks) read(ctx context.Context, id int64) stockAnswer {
	v, err := s.vouchers.Voucher(ctx, id)
	switch {
	case seckill.ErrorCode(err) == seckill.ENOTFOUND, err == nil && v.Campaign == nil:
		return stockAnswer{http.StatusNotFound, []byte(`{"error":"no sale for this voucher"}` + "\n")}
	case err != nil:
		s.logger.ErrorContext(ctx, "sale page stock", "voucher_id", id, "err", err)
		return stockAnswer{http.StatusServiceUnavailable, []byte(`{"error":"unavailable"}` + "\n")}
	}
	c := v.Campaign
	b, _ := json.Marshal(Stock{Stock: c.InitialStock, Remaining: max(0, c.LiveRemaining()), Status: c.StatusAt(s.now())})
	return stockAnswer{http.StatusOK, append(b, '\n')}
}

// keep caches an answer, failures too, so a struggling store is asked
// once a second per voucher however many pages retry.
func (s *stocks) keep(id int64, a stockAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.cache) >= maxStockEntries {
		for k, e := range s.cache {
			if now.Sub(e.at) >= StockTTL {
				delete(s.cache, k)
			}
		}
		if len(s.cache) >= maxStockEntries {
			return
		}
	}
	s.cache[id] = stockEntry{at: now, ans: a}
}

// serve answers GET {prefix}/{id}/stock for an id that isID accepted.
func (s *stocks) serve(w http.ResponseWriter, r *http.Request, rawID string) {
	id, err := strconv.ParseInt(rawID, 10, 64)
	if err != nil || id <= 0 {
		http.NotFound(w, r)
		return
	}
	a := s.get(r.Context(), id)
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	if a.code == http.StatusServiceUnavailable {
		hdr.Set("Cache-Control", "no-store")
		hdr.Set("Retry-After", "1")
	} else {
		hdr.Set("Cache-Control", StockCache)
	}
	w.WriteHeader(a.code)
	_, _ = w.Write(a.body)
}
