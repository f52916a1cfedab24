package seckill

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// campaignStore is an in-memory CatalogStore holding one voucher, and the
// audit log.
type campaignStore struct {
	CatalogStore // what the tests do not call
	v            Voucher
	audit        []AuditEntry
	created      bool // CreateVoucher was called
}

func (s *campaignStore) ChangeCampaign(_ context.Context, id int64, change func(v *Voucher) (AuditEntry, error)) (*Voucher, error) {
	if id != s.v.ID {
		return nil, Errorf(ENOTFOUND, "voucher %d not found", id)
	}
	v := s.v
	c := *s.v.Campaign
	v.Campaign = &c
	e, err := change(&v)
	if err != nil {
		return nil, err
	}
	s.v = v
	e.VoucherID = id
	s.audit = append(s.audit, e)
	out := v
	oc := c
	out.Campaign = &oc
	return &out, nil
}

func (s *campaignStore) AddAudit(_ context.Context, e AuditEntry) error {
	s.audit = append(s.audit, e)
	return nil
}

func (s *campaignStore) actions() []string {
	var out []string
	for _, e := range s.audit {
		out = append(out, e.Action)
	}
	return out
}

// campaignAdmitter records what admission was told, or fails with err.
type campaignAdmitter struct {
	err     error
	updates []string
	added   int64
}

func (a *campaignAdmitter) UpdateCampaign(_ context.Context, id int64, begin, end time.Time, paused bool) error {
	if a.err != nil {
		return a.err
	}
	a.updates = append(a.updates, begin.Format(time.RFC3339)+" "+end.Format(time.RFC3339)+" "+boolArgTest(paused))
	return nil
}

func (a *campaignAdmitter) AddStock(_ context.Context, id, n int64) error {
	if a.err != nil {
		return a.err
	}
	a.added += n
	return nil
}

func (a *campaignAdmitter) UpdateGuard(context.Context, int64, ChallengeKind, int) error {
	return a.err
}

func (a *campaignAdmitter) Warm(context.Context, WarmState) (bool, error) { return a.err == nil, a.err }

func boolArgTest(b bool) string {
	if b {
		return "paused"
	}
	return "open"
}

// remainingAdmitter answers Remaining; the management actions read it last.
type remainingAdmitter struct{ Admitter }

func (remainingAdmitter) Remaining(_ context.Context, ids []int64) (map[int64]int64, error) {
	out := map[int64]int64{}
	for _, id := range ids {
		out[id] = 7
	}
	return out, nil
}

var adminTestNow = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func newAdminService(begin, end time.Time) (*Catalog, *campaignStore, *campaignAdmitter) {
	st := &campaignStore{v: Voucher{
		ID: 42, ShopID: 1, Title: "t", PayValue: 1, ActualValue: 2, Type: VoucherSeckill,
		Campaign: &Campaign{VoucherID: 42, InitialStock: 10, Stock: 8, BeginTime: begin, EndTime: end},
	}}
	adm := &campaignAdmitter{}
	return newTestCatalog(st, adm), st, adm
}

func newTestCatalog(st *campaignStore, adm *campaignAdmitter) *Catalog {
	now := func() time.Time { return adminTestNow }
	ch, err := NewChallenges(st, NewChallenger([]byte("secret"), time.Minute, time.Minute), now)
	if err != nil {
		panic(err)
	}
	c, err := NewCatalog(CatalogDeps{Store: st, Auditor: st, Admission: adm, Admitter: remainingAdmitter{},
		Challenges: ch, Logger: slog.New(slog.DiscardHandler), Now: now})
	if err != nil {
		panic(err)
	}
	return c
}

func operator() context.Context {
	return NewContextWithUser(context.Background(), &User{ID: 3, Admin: true, Name: "alice"})
}

func TestManageNeedsAdmin(t *testing.T) {
	s, st, _ := newAdminService(adminTestNow.Add(time.Hour), adminTestNow.Add(2*time.Hour))
	for _, tt := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"anonymous", context.Background(), EUNAUTHENTICATED},
		{"user", NewContextWithUser(context.Background(), &User{ID: 5}), EFORBIDDEN},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for name, act := range map[string]func() error{
				"pause":  func() error { _, err := s.PauseCampaign(tt.ctx, 42); return err },
				"resume": func() error { _, err := s.ResumeCampaign(tt.ctx, 42); return err },
				"end":    func() error { _, err := s.EndCampaign(tt.ctx, 42); return err },
				"stock":  func() error { _, err := s.AddStock(tt.ctx, 42, 5); return err },
				"bad stock": func() error {
					_, err := s.AddStock(tt.ctx, 42, 0)
					return err
				},
				"edit": func() error {
					_, err := s.UpdateCampaign(tt.ctx, 42, CampaignEdit{Title: "x", BeginTime: adminTestNow, EndTime: adminTestNow.Add(time.Hour)})
					return err
				},
			} {
				if code := ErrorCode(act()); code != tt.want {
					t.Errorf("%s: code %q, want %q", name, code, tt.want)
				}
			}
		})
	}
	if len(st.audit) != 0 {
		t.Errorf("audit entries without an admin: %+v", st.audit)
	}
}

func TestPauseResumeEnd(t *testing.T) {
	begin, end := adminTestNow.Add(-time.Hour), adminTestNow.Add(time.Hour)
	s, st, adm := newAdminService(begin, end)
	ctx := operator()

	v, err := s.PauseCampaign(ctx, 42)
	if err != nil || !v.Campaign.Paused || v.Campaign.StatusAt(adminTestNow) != CampaignPaused {
		t.Fatalf("pause: %+v, %v", v, err)
	}
	if !v.Campaign.RemainingKnown || v.Campaign.Remaining != 7 {
		t.Errorf("pause: remaining %d known %v, want the live count", v.Campaign.Remaining, v.Campaign.RemainingKnown)
	}
	if _, err := s.PauseCampaign(ctx, 42); err != nil {
		t.Fatalf("pause again: %v", err)
	}
	if v, err = s.ResumeCampaign(ctx, 42); err != nil || v.Campaign.Paused {
		t.Fatalf("resume: %+v, %v", v, err)
	}
	if v, err = s.EndCampaign(ctx, 42); err != nil {
		t.Fatal(err)
	}
	if !v.Campaign.EndTime.Equal(adminTestNow) || !v.Campaign.BeginTime.Equal(begin) || v.Campaign.StatusAt(adminTestNow) != CampaignEnded {
		t.Errorf("end: %+v", v.Campaign)
	}
	for name, act := range map[string]func() error{
		"end again": func() error { _, err := s.EndCampaign(ctx, 42); return err },
		"pause":     func() error { _, err := s.PauseCampaign(ctx, 42); return err },
		"resume":    func() error { _, err := s.ResumeCampaign(ctx, 42); return err },
		"stock":     func() error { _, err := s.AddStock(ctx, 42, 1); return err },
	} {
		if code := ErrorCode(act()); code != ECONFLICT {
			t.Errorf("%s after the end: code %q, want CONFLICT", name, code)
		}
	}

	want := []string{
		begin.Format(time.RFC3339) + " " + end.Format(time.RFC3339) + " paused",
		begin.Format(time.RFC3339) + " " + end.Format(time.RFC3339) + " paused",
		begin.Format(time.RFC3339) + " " + end.Format(time.RFC3339) + " open",
		begin.Format(time.RFC3339) + " " + adminTestNow.Format(time.RFC3339) + " open",
	}
	if diff := cmp.Diff(want, adm.updates); diff != "" {
		t.Errorf("admission updates (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{AuditPause, AuditPause, AuditResume, AuditEnd}, st.actions()); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	for _, e := range st.audit {
		if e.Actor != "alice" || e.VoucherID != 42 {
			t.Errorf("audit entry %+v", e)
		}
	}
}

// Ending a campaign that has not begun moves its begin before the end, as
// the database and admission need begin < end.
func TestEndBeforeBegin(t *testing.T) {
	s, _, adm := newAdminService(adminTestNow.Add(time.Hour), adminTestNow.Add(2*time.Hour))
	v, err := s.EndCampaign(operator(), 42)
	if err != nil {
		t.Fatal(err)
	}
	c := v.Campaign
	if !c.EndTime.Equal(adminTestNow) || !c.BeginTime.Equal(adminTestNow.Add(-time.Millisecond)) {
		t.Errorf("window %v - %v", c.BeginTime, c.EndTime)
	}
	if len(adm.updates) != 1 {
		t.Errorf("admission updates %v", adm.updates)
	}
}

func TestAddStock(t *testing.T) {
	s, st, adm := newAdminService(adminTestNow.Add(-time.Hour), adminTestNow.Add(time.Hour))
	ctx := operator()
	v, err := s.AddStock(ctx, 42, 5)
	if err != nil {
		t.Fatal(err)
	}
	if v.Campaign.InitialStock != 15 || v.Campaign.Stock != 13 || adm.added != 5 {
		t.Errorf("after adding 5: initial %d stock %d, admission got %d", v.Campaign.InitialStock, v.Campaign.Stock, adm.added)
	}
	if e := st.audit[len(st.audit)-1]; e.Action != AuditAddStock || !strings.Contains(e.Detail, "+5") {
		t.Errorf("audit %+v", e)
	}
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "stock to add must be between 1 and 10000000"}, {-3, "stock to add must be between 1 and 10000000"},
		{MaxStock, "stock must be between 1 and 10000000"}} {
		_, err := s.AddStock(ctx, 42, tt.n)
		if ErrorCode(err) != EINVALID || ErrorField(err) != "stock" || ErrorMessage(err) != tt.want {
			t.Errorf("AddStock(%d): %v", tt.n, err)
		}
	}
	if adm.added != 5 || st.v.Campaign.InitialStock != 15 {
		t.Errorf("refused additions changed something: admission %d, initial %d", adm.added, st.v.Campaign.InitialStock)
	}
}

func TestUpdateCampaign(t *testing.T) {
	begin, end := adminTestNow.Add(time.Hour), adminTestNow.Add(2*time.Hour)
	s, st, adm := newAdminService(begin, end)
	ctx := operator()

	// The same validation, with the same messages, as a new campaign.
	for _, tt := range []struct {
		e     CampaignEdit
		field string
		msg   string
	}{
		{CampaignEdit{Title: "  ", BeginTime: begin, EndTime: end}, "title", "title is required"},
		{CampaignEdit{Title: "ok", SubTitle: strings.Repeat("x", 256), BeginTime: begin, EndTime: end}, "subTitle", "subTitle must be at most 255 characters"},
		{CampaignEdit{Title: "ok", EndTime: end}, "beginTime", "beginTime is required"},
		{CampaignEdit{Title: "ok", BeginTime: end, EndTime: begin}, "endTime", "endTime must be after beginTime"},
	} {
		_, err := s.UpdateCampaign(ctx, 42, tt.e)
		if ErrorCode(err) != EINVALID || ErrorField(err) != tt.field || ErrorMessage(err) != tt.msg {
			t.Errorf("UpdateCampaign(%+v): %v, want %s: %s", tt.e, err, tt.field, tt.msg)
		}
	}
	if len(st.audit) != 0 || len(adm.updates) != 0 {
		t.Fatalf("refused edits changed something: %+v %v", st.audit, adm.updates)
	}

	nb, ne := begin.Add(time.Hour), end.Add(3*time.Hour)
	v, err := s.UpdateCampaign(ctx, 42, CampaignEdit{Title: " New title ", SubTitle: "sub", Rules: "r", BeginTime: nb, EndTime: ne})
	if err != nil {
		t.Fatal(err)
	}
	if v.Title != "New title" || v.SubTitle != "sub" || v.Rules != "r" || !v.Campaign.BeginTime.Equal(nb) || !v.Campaign.EndTime.Equal(ne) {
		t.Errorf("edited voucher %+v %+v", v, v.Campaign)
	}
	if len(adm.updates) != 1 || !strings.HasPrefix(adm.updates[0], nb.Format(time.RFC3339)) {
		t.Errorf("admission updates %v", adm.updates)
	}
	if e := st.audit[0]; e.Action != AuditEdit || !strings.Contains(e.Detail, `title "t" → "New title"`) {
		t.Errorf("audit %+v", e)
	}

	// Once it has started, texts and times are fixed.
	st.v.Campaign.BeginTime = adminTestNow.Add(-time.Minute)
	_, err = s.UpdateCampaign(ctx, 42, CampaignEdit{Title: "late", BeginTime: nb, EndTime: ne})
	if ErrorCode(err) != ECONFLICT {
		t.Errorf("edit after start: %v", err)
	}
}

// When admission cannot take a change, Postgres is put back, the undo is
// audited, and the operator is told to try again.
func TestManageRevertsWhenAdmissionFails(t *testing.T) {
	begin, end := adminTestNow.Add(-time.Hour), adminTestNow.Add(time.Hour)
	s, st, adm := newAdminService(begin, end)
	adm.err = errors.New("redis: connection refused")
	ctx := operator()

	if _, err := s.PauseCampaign(ctx, 42); ErrorCode(err) != EUNAVAILABLE {
		t.Fatalf("pause: %v", err)
	}
	if st.v.Campaign.Paused {
		t.Error("pause stayed in Postgres")
	}
	if _, err := s.AddStock(ctx, 42, 4); ErrorCode(err) != EUNAVAILABLE {
		t.Fatalf("add stock: %v", err)
	}
	if c := st.v.Campaign; c.InitialStock != 10 || c.Stock != 8 {
		t.Errorf("stock stayed added: initial %d stock %d", c.InitialStock, c.Stock)
	}
	if _, err := s.EndCampaign(ctx, 42); ErrorCode(err) != EUNAVAILABLE {
		t.Fatalf("end: %v", err)
	}
	if !st.v.Campaign.EndTime.Equal(end) {
		t.Errorf("end time %v stayed changed", st.v.Campaign.EndTime)
	}
	want := []string{AuditPause, AuditRevert, AuditAddStock, AuditRevert, AuditEnd, AuditRevert}
	if diff := cmp.Diff(want, st.actions()); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}

	// A campaign admission does not hold takes the change when warmed.
	adm.err = Errorf(ENOTFOUND, "voucher 42 not found")
	if v, err := s.PauseCampaign(ctx, 42); err != nil || !v.Campaign.Paused || !st.v.Campaign.Paused {
		t.Errorf("pause of a campaign admission does not hold: %+v, %v", v, err)
	}
}

// A guard change admission cannot take is undone whole, the quiz's
// questions included (the store hands the change the questions as they
// stand, and writes back what it leaves).
func TestGuardRevertRestoresQuiz(t *testing.T) {
	s, st, adm := newAdminService(adminTestNow.Add(time.Hour), adminTestNow.Add(2*time.Hour))
	old := []QuizQuestion{{Question: "What is two plus two?", Answers: []string{"4"}}}
	st.v.Campaign.Challenge, st.v.Campaign.Quiz = ChallengeQuiz, old
	adm.err = errors.New("redis: connection refused")
	_, err := s.UpdateGuard(operator(), 42, GuardEdit{Challenge: ChallengeQuiz, Brake: 3,
		Quiz: []QuizQuestion{{Question: "What is the capital of France?", Answers: []string{"paris"}}}})
	if ErrorCode(err) != EUNAVAILABLE {
		t.Fatalf("UpdateGuard with admission down: %v", err)
	}
	c := st.v.Campaign
	if diff := cmp.Diff(old, c.Quiz); diff != "" {
		t.Errorf("questions after the undo (-want +got):\n%s", diff)
	}
	if c.Challenge != ChallengeQuiz || c.Brake != 0 {
		t.Errorf("after the undo: challenge %s brake %d", c.Challenge, c.Brake)
	}
	if diff := cmp.Diff([]string{AuditGuard, AuditRevert}, st.actions()); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
}

func TestAddSeckillVoucherIsAudited(t *testing.T) {
	st := &campaignStore{}
	s := newTestCatalog(st, &campaignAdmitter{})
	ctx := NewContextWithUser(context.Background(), &User{ID: 9, Admin: true})
	_, err := s.AddSeckillVoucher(ctx, NewSeckillVoucher{ShopID: 1, Title: "new", PayValue: 1, ActualValue: 1, Stock: 3,
		BeginTime: adminTestNow, EndTime: adminTestNow.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.audit) != 1 || st.audit[0].Action != AuditCreate || st.audit[0].Actor != "token user 9" || st.audit[0].VoucherID != 77 {
		t.Errorf("audit %+v", st.audit)
	}
}

func (s *campaignStore) CreateVoucher(_ context.Context, v *Voucher) error {
	v.ID, v.Campaign.VoucherID = 77, 77
	s.created = true
	return nil
}

func TestValidateAdminCredentials(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{{"alice", true}, {"ops.team-1@shop", true}, {"", false}, {".hidden", false}, {"a b", false}, {strings.Repeat("a", 65), false}} {
		if err := ValidateAdminName(tt.name); (err == nil) != tt.ok {
			t.Errorf("ValidateAdminName(%q) = %v", tt.name, err)
		}
	}
	for _, tt := range []struct {
		pw string
		ok bool
	}{{"123456789012", true}, {"12345678901", false}, {strings.Repeat("x", 73), false}, {"ééééééééééééé", true}} {
		if err := ValidateAdminPassword(tt.pw); (err == nil) != tt.ok {
			t.Errorf("ValidateAdminPassword(%q) = %v", tt.pw, err)
		}
	}
}
