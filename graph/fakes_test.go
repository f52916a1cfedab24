package graph

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"seckill/internal/seckill"
)

// In-memory fakes of the Service's dependencies, so the tests exercise the
// real *seckill.Service and its auth and validation rules. They keep only
// what these tests need; the adapters' own tests run against Postgres and
// Redis, and contract_test.go holds memAdmitter and memBus to the Redis
// adapter's answers.

type memStore struct {
	mu       sync.Mutex
	vouchers map[int64]*seckill.Voucher
	orders   map[int64]*seckill.Order
	nextID   int64
	// fail, when set, is returned by every read: an infrastructure
	// failure whose text must never reach a client.
	fail error
	// panicOnRead makes every read panic.
	panicOnRead bool
}

func newMemStore() *memStore {
	return &memStore{vouchers: map[int64]*seckill.Voucher{}, orders: map[int64]*seckill.Order{}}
}

func (s *memStore) read() error {
	if s.panicOnRead {
		panic("store: corrupted page 7 of /var/lib/postgresql/secret")
	}
	return s.fail
}

func (s *memStore) CreateVoucher(_ context.Context, v *seckill.Voucher) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	v.ID = s.nextID
	v.CreatedAt = time.Now().UTC()
	if v.Campaign != nil {
		v.Campaign.VoucherID = v.ID
		v.Campaign.CreatedAt = v.CreatedAt
	}
	s.vouchers[v.ID] = cloneVoucher(v)
	return nil
}

func (s *memStore) DeleteVoucher(_ context.Context, id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.vouchers[id]; !ok {
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", id)
	}
	delete(s.vouchers, id)
	return nil
}

func (s *memStore) Voucher(_ context.Context, id int64) (*seckill.Voucher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, err
	}
	v, ok := s.vouchers[id]
	if !ok {
		return nil, seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", id)
	}
	return cloneVoucher(v), nil
}

func (s *memStore) Vouchers(_ context.Context, f seckill.VoucherFilter) ([]*seckill.Voucher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, fmt.Errorf("store: select vouchers: %w", err)
	}
	var out []*seckill.Voucher
	for _, v := range s.vouchers {
		if v.ID > f.After {
			out = append(out, cloneVoucher(v))
		}
	}
	slices.SortFunc(out, func(a, b *seckill.Voucher) int { return cmp.Compare(a.ID, b.ID) })
	if len(out) > f.First {
		out = out[:f.First]
	}
	return out, nil
}

func (s *memStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.vouchers)
}

func (s *memStore) Order(_ context.Context, id int64) (*seckill.Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, err
	}
	o, ok := s.orders[id]
	if !ok {
		return nil, seckill.Errorf(seckill.ENOTFOUND, "order %d not found", id)
	}
	c := *o
	return &c, nil
}

func (s *memStore) OrdersByUser(_ context.Context, userID int64, limit int) ([]*seckill.Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, err
	}
	var out []*seckill.Order
	for _, o := range s.orders {
		if o.UserID == userID {
			c := *o
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *seckill.Order) int { return cmp.Compare(b.ID, a.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (s *memStore) PersistOrders(_ context.Context, adms []seckill.Admission) ([]seckill.PersistOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]seckill.PersistOutcome, 0, len(adms))
	for _, a := range adms {
		if o, ok := s.orders[a.OrderID]; ok { // decided by an earlier delivery
			out = append(out, seckill.PersistOutcome{Admission: a, Status: o.Status, Reason: o.FailureReason, CreatedAt: o.CreatedAt})
			continue
		}
		v, ok := s.vouchers[a.VoucherID]
		if !ok || v.Campaign == nil || v.Campaign.Stock <= 0 {
			const reason = "no stock left"
			s.orders[a.OrderID] = &seckill.Order{ID: a.OrderID, VoucherID: a.VoucherID, UserID: a.UserID,
				Status: seckill.OrderFailed, CreatedAt: a.AdmittedAt, FailureReason: reason}
			out = append(out, seckill.PersistOutcome{Admission: a, Status: seckill.OrderFailed, Reason: reason})
			continue
		}
		v.Campaign.Stock--
		s.orders[a.OrderID] = &seckill.Order{ID: a.OrderID, VoucherID: a.VoucherID, UserID: a.UserID,
			Status: seckill.OrderCreated, CreatedAt: a.AdmittedAt}
		out = append(out, seckill.PersistOutcome{Admission: a, Status: seckill.OrderCreated, CreatedAt: a.AdmittedAt, Inserted: true})
	}
	return out, nil
}

func (s *memStore) LiveCampaigns(context.Context) ([]int64, error) { return nil, nil }

func (s *memStore) CampaignsEndedBetween(context.Context, time.Time, time.Time) ([]int64, error) {
	return nil, nil
}

func (s *memStore) CampaignsEndingAfter(context.Context, time.Time) ([]int64, error) {
	return nil, nil
}
func (s *memStore) RebuildCampaign(_ context.Context, id int64, _ []int) (seckill.WarmState, error) {
	return seckill.WarmState{}, seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", id)
}
func (s *memStore) CampaignEpochs(_ context.Context, id int64) (seckill.Epochs, error) {
	return seckill.Epochs{}, seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", id)
}

func (s *memStore) CampaignQuiz(context.Context, int64) ([]seckill.QuizQuestion, error) {
	return nil, nil
}

func cloneVoucher(v *seckill.Voucher) *seckill.Voucher {
	c := *v
	if v.Campaign != nil {
		cc := *v.Campaign
		c.Campaign = &cc
	}
	return &c
}

// memAdmitter decides purchases like the Redis script: window, one per
// user, stock.
type memAdmitter struct {
	mu        sync.Mutex
	campaigns map[int64]*memCampaign
	pending   map[int64]seckill.Admission
	// failMode makes Admit fail (see setFailure).
	failMode string
	// block, when set, makes Admit wait for its context to end, telling
	// blocked when it starts and then what ended it.
	block chan error
}

type memCampaign struct {
	c      seckill.Campaign
	left   int64
	seq    int64
	buyers map[int64]bool
}

func newMemAdmitter() *memAdmitter {
	return &memAdmitter{campaigns: map[int64]*memCampaign{}, pending: map[int64]seckill.Admission{}}
}

func (a *memAdmitter) Warm(_ context.Context, st seckill.WarmState) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.campaigns[st.Campaign.VoucherID]; ok {
		return false, nil
	}
	a.campaigns[st.Campaign.VoucherID] = &memCampaign{c: st.Campaign, left: st.Campaign.Stock, seq: 0, buyers: map[int64]bool{}}
	return true, nil
}

func (a *memAdmitter) Admit(ctx context.Context, voucherID, userID int64, t seckill.Ticket) (seckill.Outcome, seckill.Admission, error) {
	a.mu.Lock()
	if block := a.block; block != nil {
		a.mu.Unlock()
		block <- nil // started
		<-ctx.Done()
		block <- ctx.Err()
		return "", seckill.Admission{}, ctx.Err()
	}
	defer a.mu.Unlock()
	if a.failMode == "waiting" { // after a wrong answer, 1.5 s to go
		return seckill.OutcomeRateLimited, seckill.Admission{RetryAfter: 1500 * time.Millisecond}, nil
	}
	if out, err, ok := a.failure(); ok {
		return out, seckill.Admission{}, err
	}
	c, ok := a.campaigns[voucherID]
	if !ok {
		return "", seckill.Admission{}, seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	now := time.Now()
	switch {
	case now.Before(c.c.BeginTime):
		return seckill.OutcomeNotStarted, seckill.Admission{}, nil
	case !now.Before(c.c.EndTime):
		return seckill.OutcomeEnded, seckill.Admission{}, nil
	case c.buyers[userID]:
		return seckill.OutcomeAlreadyPurchased, seckill.Admission{}, nil
	case c.left <= 0:
		return seckill.OutcomeSoldOut, seckill.Admission{}, nil
	}
	c.left--
	c.seq++
	c.buyers[userID] = true
	adm := seckill.Admission{OrderID: seckill.OrderID(voucherID, c.seq), VoucherID: voucherID, UserID: userID, AdmittedAt: now.UTC()}
	a.pending[adm.OrderID] = adm
	return seckill.OutcomeAccepted, adm, nil
}

func (a *memAdmitter) Remaining(_ context.Context, ids []int64) (map[int64]int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[int64]int64{}
	for _, id := range ids {
		if c, ok := a.campaigns[id]; ok {
			out[id] = c.left
		}
	}
	return out, nil
}

func (a *memAdmitter) Pending(_ context.Context, orderID int64) (*seckill.Admission, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	adm, ok := a.pending[orderID]
	if !ok {
		return nil, seckill.Errorf(seckill.ENOTFOUND, "order %d not pending", orderID)
	}
	return &adm, nil
}

func (a *memAdmitter) Ack(_ context.Context, adms []seckill.Admission) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, adm := range adms {
		delete(a.pending, adm.OrderID)
	}
	return nil
}

func (a *memAdmitter) Release(_ context.Context, adm seckill.Admission, keepBuyer bool) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pending[adm.OrderID]
	if !ok {
		return false, nil
	}
	if p.UserID != adm.UserID {
		return false, seckill.Errorf(seckill.ECONFLICT, "order %d is pending for another user", adm.OrderID)
	}
	delete(a.pending, adm.OrderID)
	if c, ok := a.campaigns[adm.VoucherID]; ok {
		c.left++
		if !keepBuyer {
			delete(c.buyers, adm.UserID)
		}
	}
	return true, nil
}

func (a *memAdmitter) Stale(context.Context, []int64, time.Duration, int) ([]seckill.Admission, error) {
	return nil, nil
}
func (a *memAdmitter) NeedsRebuild(context.Context, []int64) ([]int64, error) { return nil, nil }
func (a *memAdmitter) Retire(context.Context, []int64, time.Duration) (int, error) {
	return 0, nil
}
func (a *memAdmitter) BeginRebuild(context.Context, int64) (seckill.RebuildLock, bool, error) {
	return seckill.RebuildLock{}, false, nil
}
func (a *memAdmitter) AbortRebuild(context.Context, int64, string) error             { return nil }
func (a *memAdmitter) PendingOf(context.Context, int64) ([]seckill.Admission, error) { return nil, nil }
func (a *memAdmitter) FinishRebuild(context.Context, string, seckill.WarmState) (bool, error) {
	return false, nil
}

func (a *memAdmitter) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.campaigns)
}

// memQueue records what the service enqueued.
type memQueue struct {
	mu   sync.Mutex
	adms []seckill.Admission
}

func (q *memQueue) RequeuePersist(ctx context.Context, adm seckill.Admission) error {
	return q.EnqueuePersist(ctx, adm)
}

func (q *memQueue) EnqueuePersist(_ context.Context, adm seckill.Admission) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.adms = append(q.adms, adm)
	return nil
}

func (q *memQueue) take() []seckill.Admission {
	q.mu.Lock()
	defer q.mu.Unlock()
	adms := q.adms
	q.adms = nil
	return adms
}

// memBus fans status events out to the subscribers of each order, at most
// once, like Redis pub/sub.
type memBus struct {
	mu   sync.Mutex
	subs map[int64]map[*memSub]bool
}

type memSub struct {
	ch   chan seckill.StatusEvent
	once sync.Once
}

func newMemBus() *memBus { return &memBus{subs: map[int64]map[*memSub]bool{}} }

func (b *memBus) Publish(_ context.Context, evs ...seckill.StatusEvent) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ev := range evs {
		for s := range b.subs[ev.OrderID] {
			select {
			case s.ch <- ev:
			default: // a slow subscriber misses it, as with Redis
			}
		}
	}
	return nil
}

func (b *memBus) Subscribe(ctx context.Context, orderID int64) (<-chan seckill.StatusEvent, func(), error) {
	s := &memSub{ch: make(chan seckill.StatusEvent, 8)}
	b.mu.Lock()
	if b.subs[orderID] == nil {
		b.subs[orderID] = map[*memSub]bool{}
	}
	b.subs[orderID][s] = true
	b.mu.Unlock()
	cancel := func() {
		s.once.Do(func() {
			b.mu.Lock()
			delete(b.subs[orderID], s)
			b.mu.Unlock()
			close(s.ch)
		})
	}
	stop := context.AfterFunc(ctx, cancel)
	return s.ch, func() { stop(); cancel() }, nil
}

// subscribers returns how many subscriptions order id has.
func (b *memBus) subscribers(id int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs[id])
}

// The catalog's changes and audit log, which these tests do not reach.

func (s *memStore) ChangeCampaign(context.Context, int64, func(v *seckill.Voucher) (seckill.AuditEntry, error)) (*seckill.Voucher, error) {
	return nil, seckill.Errorf(seckill.EUNAVAILABLE, "not in these tests")
}

func (s *memStore) AddAudit(context.Context, seckill.AuditEntry) error { return nil }

func (a *memAdmitter) UpdateCampaign(context.Context, int64, time.Time, time.Time, bool) error {
	return nil
}
func (a *memAdmitter) AddStock(context.Context, int64, int64) error { return nil }
func (a *memAdmitter) UpdateGuard(context.Context, int64, seckill.ChallengeKind, int) error {
	return nil
}
