package web_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"seckill/internal/seckill"
	"seckill/web"
)

var testNow = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// fakeService is the domain as the dashboard sees it: one voucher per id,
// with the create validation of the real one.
type fakeService struct {
	mu       sync.Mutex
	vouchers map[int64]*seckill.Voucher
	calls    []string
	err      error // returned by every management action when set
	nextID   int64
	quiz     map[int64][]seckill.QuizQuestion
	totals   map[int64]seckill.CampaignTotals // Postgres's side; 10 units, none sold when unset
}

func newFakeService() *fakeService {
	return &fakeService{vouchers: map[int64]*seckill.Voucher{}, nextID: 1}
}

func (f *fakeService) add(title string, begin, end time.Time) *seckill.Voucher {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := &seckill.Voucher{ID: f.nextID, ShopID: 1, Title: title, PayValue: 100, ActualValue: 200, Type: seckill.VoucherSeckill,
		Campaign: &seckill.Campaign{VoucherID: f.nextID, InitialStock: 10, Stock: 10, BeginTime: begin, EndTime: end}}
	f.vouchers[v.ID] = v
	f.nextID++
	return v
}

func (f *fakeService) AdminCancelOrder(ctx context.Context, id int64) (*seckill.Order, error) {
	f.record("cancel-order")
	return nil, seckill.Errorf(seckill.ENOTFOUND, "order %d not found", id)
}

func (f *fakeService) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeService) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func requireAdmin(ctx context.Context) error {
	u := seckill.UserFromContext(ctx)
	if u == nil || !u.Admin {
		return seckill.Errorf(seckill.EFORBIDDEN, "admin role required")
	}
	return nil
}

func (f *fakeService) AddSeckillVoucher(ctx context.Context, in seckill.NewSeckillVoucher) (*seckill.Voucher, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if err := in.Validate(testNow); err != nil {
		return nil, err
	}
	in = in.Normalized()
	f.record("create " + in.Title)
	v := f.add(in.Title, in.BeginTime, in.EndTime)
	f.mu.Lock()
	defer f.mu.Unlock()
	v.Campaign.Challenge, v.Campaign.PoWBits, v.Campaign.Brake = in.Challenge, in.Difficulty(), in.Brake
	if in.Challenge == seckill.ChallengeQuiz {
		if f.quiz == nil {
			f.quiz = map[int64][]seckill.QuizQuestion{}
		}
		f.quiz[v.ID] = in.Quiz
	}
	return v, nil
}

func (f *fakeService) Voucher(_ context.Context, id int64) (*seckill.Voucher, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.vouchers[id]
	if !ok {
		return nil, seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", id)
	}
	c := *v
	cc := *v.Campaign
	c.Campaign = &cc
	return &c, nil
}

func (f *fakeService) Order(context.Context, int64) (*seckill.Order, error) {
	return nil, seckill.Errorf(seckill.ENOTFOUND, "no order")
}

func (f *fakeService) manage(ctx context.Context, call string, id int64) (*seckill.Voucher, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	if f.err != nil {
		return nil, f.err
	}
	v, err := f.Voucher(ctx, id)
	if err == nil {
		f.record(call)
	}
	return v, err
}

func (f *fakeService) UpdateCampaign(ctx context.Context, id int64, e seckill.CampaignEdit) (*seckill.Voucher, error) {
	in := seckill.NewSeckillVoucher{ShopID: 1, Title: e.Title, Stock: 1, BeginTime: e.BeginTime, EndTime: e.EndTime}
	if err := in.Validate(testNow); err != nil {
		return nil, err
	}
	in = in.Normalized()
	return f.manage(ctx, "edit "+in.Title+" "+e.BeginTime.Format(time.RFC3339), id)
}

func (f *fakeService) PauseCampaign(ctx context.Context, id int64) (*seckill.Voucher, error) {
	return f.manage(ctx, "pause", id)
}

func (f *fakeService) ResumeCampaign(ctx context.Context, id int64) (*seckill.Voucher, error) {
	return f.manage(ctx, "resume", id)
}

func (f *fakeService) EndCampaign(ctx context.Context, id int64) (*seckill.Voucher, error) {
	return f.manage(ctx, "end", id)
}

func (f *fakeService) AddStock(ctx context.Context, id, n int64) (*seckill.Voucher, error) {
	if n < 1 {
		return nil, seckill.Invalidf("stock", "stock to add must be between 1 and 10000000")
	}
	return f.manage(ctx, "stock", id)
}

func (f *fakeService) UpdateGuard(ctx context.Context, id int64, e seckill.GuardEdit) (*seckill.Voucher, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	v, err := f.manage(ctx, "guard", id)
	if err == nil {
		f.mu.Lock()
		f.vouchers[id].Campaign.Challenge, f.vouchers[id].Campaign.PoWBits, f.vouchers[id].Campaign.Brake = e.Challenge, e.Difficulty(), e.Brake
		f.quiz = map[int64][]seckill.QuizQuestion{id: e.Quiz}
		f.mu.Unlock()
	}
	return v, err
}

func (f *fakeService) CampaignQuiz(_ context.Context, id int64) ([]seckill.QuizQuestion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.quiz[id], nil
}

// fakeRecords answers the dashboard's reads from the fake service.
type fakeRecords struct{ svc *fakeService }

func (r fakeRecords) Campaigns(_ context.Context, f seckill.CampaignFilter) ([]*seckill.Voucher, error) {
	r.svc.mu.Lock()
	defer r.svc.mu.Unlock()
	var out []*seckill.Voucher
	for id := r.svc.nextID - 1; id > 0; id-- {
		if v, ok := r.svc.vouchers[id]; ok && (f.Before == 0 || id < f.Before) &&
			(f.EndedAfter.IsZero() || v.Campaign.EndTime.After(f.EndedAfter)) {
			out = append(out, v)
		}
	}
	return out, nil
}

func (r fakeRecords) CampaignTotals(_ context.Context, id int64) (seckill.CampaignTotals, error) {
	r.svc.mu.Lock()
	defer r.svc.mu.Unlock()
	if t, ok := r.svc.totals[id]; ok {
		return t, nil
	}
	return seckill.CampaignTotals{InitialStock: 10, Stock: 10}, nil
}

func (r fakeRecords) CampaignOrders(context.Context, seckill.OrderFilter) ([]*seckill.Order, error) {
	return nil, nil
}

func (r fakeRecords) AuditLog(context.Context, int64, int) ([]seckill.AuditEntry, error) {
	return nil, nil
}

// fakeSessions holds operators and sessions in memory.
type fakeSessions struct {
	mu       sync.Mutex
	sessions map[string]int64
	deleted  []string
}

func newFakeSessions() *fakeSessions { return &fakeSessions{sessions: map[string]int64{}} }

const (
	testAdmin    = "alice"
	testPassword = "correct horse battery"
)

func (s *fakeSessions) AuthenticateAdmin(_ context.Context, name, password string) (*seckill.Admin, error) {
	if name != testAdmin || password != testPassword {
		return nil, seckill.Errorf(seckill.EUNAUTHENTICATED, "wrong user name or password")
	}
	return &seckill.Admin{ID: 1, Name: testAdmin}, nil
}

func (s *fakeSessions) CreateAdminSession(_ context.Context, adminID int64, ttl time.Duration) (string, time.Time, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions[token] = adminID
	return token, time.Now().Add(ttl), nil
}

func (s *fakeSessions) AdminBySession(_ context.Context, token string) (*seckill.Admin, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[token]; !ok {
		return nil, seckill.Errorf(seckill.EUNAUTHENTICATED, "no session")
	}
	return &seckill.Admin{ID: 1, Name: testAdmin}, nil
}

func (s *fakeSessions) DeleteAdminSession(_ context.Context, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, token)
	s.deleted = append(s.deleted, token)
	return nil
}

// fakeQueues are the job queues' figures.
type fakeQueues []web.Queue

func (q fakeQueues) Queues() ([]web.Queue, time.Time, error) { return q, testNow, nil }

// fakeRefunds holds refunds by payment id, each of campaign 1 unless set.
type fakeRefunds struct {
	mu      sync.Mutex
	refunds []seckill.Refund
	retried []string
}

func (f *fakeRefunds) List(_ context.Context, flt seckill.RefundFilter) ([]seckill.Refund, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []seckill.Refund
	for _, r := range f.refunds {
		if (flt.VoucherID == 0 || r.VoucherID == flt.VoucherID) && (flt.Status == "" || r.Status == flt.Status) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeRefunds) Stats(_ context.Context, voucherID int64) (seckill.RefundStats, error) {
	rs, _ := f.List(context.Background(), seckill.RefundFilter{VoucherID: voucherID})
	st := seckill.RefundStats{ByStatus: map[seckill.PaymentStatus]seckill.RefundTally{}}
	for _, r := range rs {
		t := st.ByStatus[r.Status]
		if t.Amounts == nil {
			t.Amounts = map[string]int64{}
		}
		t.Count++
		t.Amounts[r.Currency] += r.Amount
		st.ByStatus[r.Status] = t
	}
	return st, nil
}

func (f *fakeRefunds) Retry(ctx context.Context, paymentID string) (*seckill.RefundSend, error) {
	if err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.refunds {
		if r.PaymentID == paymentID && r.Status == seckill.PaymentRefundFailed {
			f.refunds[i].Status = seckill.PaymentRefundNeeded
			f.retried = append(f.retried, paymentID)
			return &seckill.RefundSend{PaymentID: paymentID}, nil
		}
	}
	return nil, seckill.Errorf(seckill.ECONFLICT, "payment %s has no failed refund", paymentID)
}

func (f *fakeRefunds) Sending() bool { return true }

// fakeRooms answers the waiting rooms' funnels it holds; a campaign
// without one is ECONFLICT, as in the domain, and err, when set, answers
// every call.
type fakeRooms struct {
	mu      sync.Mutex
	funnels map[int64]seckill.RoomFunnel
	err     error
}

func (f *fakeRooms) Funnel(_ context.Context, voucherID int64) (seckill.RoomFunnel, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return seckill.RoomFunnel{}, f.err
	}
	r, ok := f.funnels[voucherID]
	if !ok {
		return seckill.RoomFunnel{}, seckill.Errorf(seckill.ECONFLICT, "voucher %d's sale has no waiting room", voucherID)
	}
	return r, nil
}

func (f *fakeRooms) set(voucherID int64, r seckill.RoomFunnel, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.funnels == nil {
		f.funnels = map[int64]seckill.RoomFunnel{}
	}
	f.funnels[voucherID], f.err = r, err
}
