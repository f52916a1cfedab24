package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/bcrypt"

	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

// operators are the domain's operators over the store, hashing fast.
func operators(t *testing.T, s *store.Store) *seckill.Operators {
	t.Helper()
	ops, err := seckill.NewOperators(s, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func TestAdmins(t *testing.T) {
	db, s := newStore(t)
	ops := operators(t, s)
	ctx := t.Context()

	a, err := ops.CreateAdmin(ctx, "alice", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == 0 || a.Name != "alice" || a.CreatedAt.IsZero() {
		t.Errorf("CreateAdmin = %+v", a)
	}
	var hash string
	if err := db.NewRaw("SELECT password_hash FROM admin_user WHERE id = ?", a.ID).Scan(ctx, &hash); err != nil {
		t.Fatal(err)
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte("correct horse battery")) != nil {
		t.Errorf("stored hash %q is not a bcrypt hash of the password", hash)
	}

	for _, tt := range []struct {
		name, user, password, code string
	}{
		{"taken", "alice", "another long password", seckill.ECONFLICT},
		{"short password", "bob", "short", seckill.EINVALID},
		{"bad name", "bob smith", "another long password", seckill.EINVALID},
	} {
		t.Run("create/"+tt.name, func(t *testing.T) {
			if _, err := ops.CreateAdmin(ctx, tt.user, tt.password); seckill.ErrorCode(err) != tt.code {
				t.Errorf("err = %v, want code %s", err, tt.code)
			}
		})
	}

	t.Run("authenticate", func(t *testing.T) {
		got, err := ops.AuthenticateAdmin(ctx, "alice", "correct horse battery")
		if err != nil || got.ID != a.ID {
			t.Fatalf("AuthenticateAdmin = %+v, %v", got, err)
		}
		for _, c := range [][2]string{{"alice", "wrong password!"}, {"nobody", "correct horse battery"}, {"", ""}} {
			_, err := ops.AuthenticateAdmin(ctx, c[0], c[1])
			if seckill.ErrorCode(err) != seckill.EUNAUTHENTICATED || seckill.ErrorMessage(err) != "wrong user name or password" {
				t.Errorf("AuthenticateAdmin(%q, %q): %v", c[0], c[1], err)
			}
		}
	})

	t.Run("sessions", func(t *testing.T) {
		token, expires, err := ops.CreateAdminSession(ctx, a.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if len(token) < 40 || time.Until(expires) < 59*time.Minute || time.Until(expires) > 61*time.Minute {
			t.Errorf("token %q expires %v", token, expires)
		}
		var stored int
		if err := db.NewRaw("SELECT count(*) FROM admin_session WHERE token_hash = convert_to(?, 'UTF8')", token).Scan(ctx, &stored); err != nil {
			t.Fatal(err)
		}
		if stored != 0 {
			t.Error("the token is stored in clear")
		}
		got, err := ops.AdminBySession(ctx, token)
		if err != nil || got.Name != "alice" {
			t.Fatalf("AdminBySession = %+v, %v", got, err)
		}
		if _, err := ops.AdminBySession(ctx, token+"x"); seckill.ErrorCode(err) != seckill.EUNAUTHENTICATED {
			t.Errorf("wrong token: %v", err)
		}
		if err := ops.DeleteAdminSession(ctx, token); err != nil {
			t.Fatal(err)
		}
		if _, err := ops.AdminBySession(ctx, token); seckill.ErrorCode(err) != seckill.EUNAUTHENTICATED {
			t.Errorf("deleted session: %v", err)
		}

		// An expired session opens nothing, and the next new session
		// sweeps it away.
		old, _, err := ops.CreateAdminSession(ctx, a.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "UPDATE admin_session SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second'"); err != nil {
			t.Fatal(err)
		}
		if _, err := ops.AdminBySession(ctx, old); seckill.ErrorCode(err) != seckill.EUNAUTHENTICATED {
			t.Errorf("expired session: %v", err)
		}
		if _, _, err := ops.CreateAdminSession(ctx, a.ID, time.Hour); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.NewRaw("SELECT count(*) FROM admin_session").Scan(ctx, &n); err != nil || n != 1 {
			t.Errorf("%d sessions after the sweep (%v), want 1", n, err)
		}
		if _, _, err := ops.CreateAdminSession(ctx, a.ID+100, time.Hour); seckill.ErrorCode(err) != seckill.ENOTFOUND {
			t.Errorf("session of no admin: %v", err)
		}
	})

	t.Run("ensure", func(t *testing.T) {
		token, _, err := ops.CreateAdminSession(ctx, a.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if changed, err := ops.EnsureAdmin(ctx, "alice", "correct horse battery"); err != nil || changed {
			t.Errorf("same password: changed %v, %v", changed, err)
		}
		if _, err := ops.AdminBySession(ctx, token); err != nil {
			t.Errorf("an unchanged password ended the session: %v", err)
		}
		if changed, err := ops.EnsureAdmin(ctx, "alice", "a new long password"); err != nil || !changed {
			t.Errorf("new password: changed %v, %v", changed, err)
		}
		if _, err := ops.AdminBySession(ctx, token); seckill.ErrorCode(err) != seckill.EUNAUTHENTICATED {
			t.Errorf("a new password left the old session open: %v", err)
		}
		if _, err := ops.AuthenticateAdmin(ctx, "alice", "a new long password"); err != nil {
			t.Errorf("new password refused: %v", err)
		}
		if changed, err := ops.EnsureAdmin(ctx, "carol", "carols long password"); err != nil || !changed {
			t.Errorf("new admin: changed %v, %v", changed, err)
		}
		if _, err := ops.EnsureAdmin(ctx, "carol", "short"); seckill.ErrorField(err) != "password" {
			t.Errorf("short password: %v", err)
		}
	})
}

func TestChangeCampaign(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	v := storetest.CreateCampaign(t, db, 10)
	persist(t, s, adm(v.ID, 1, 1), adm(v.ID, 2, 2))

	begin := v.Campaign.BeginTime.Add(time.Minute)
	got, err := s.ChangeCampaign(ctx, v.ID, func(w *seckill.Voucher) (seckill.AuditEntry, error) {
		if w.Campaign.Stock != 8 {
			t.Errorf("change sees stock %d, want 8", w.Campaign.Stock)
		}
		w.Title, w.SubTitle, w.Rules = "new title", "new sub", "new rules"
		w.Campaign.InitialStock += 5
		w.Campaign.Stock += 5
		w.Campaign.Paused = true
		w.Campaign.BeginTime = begin
		return seckill.AuditEntry{Actor: "alice", Action: seckill.AuditEdit, Detail: "everything"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := s.Voucher(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Title != "new title" || stored.SubTitle != "new sub" || stored.Rules != "new rules" ||
		stored.Campaign.InitialStock != 15 || stored.Campaign.Stock != 13 || !stored.Campaign.Paused ||
		!stored.Campaign.BeginTime.Equal(begin) {
		t.Errorf("stored %+v %+v", stored, stored.Campaign)
	}
	if got.Title != stored.Title || got.Campaign.Stock != stored.Campaign.Stock {
		t.Errorf("returned %+v, stored %+v", got, stored)
	}

	// A refusal from change writes nothing, the audit entry included.
	refused := seckill.Errorf(seckill.ECONFLICT, "no")
	_, err = s.ChangeCampaign(ctx, v.ID, func(w *seckill.Voucher) (seckill.AuditEntry, error) {
		w.Title = "never"
		return seckill.AuditEntry{}, refused
	})
	if !errors.Is(err, refused) {
		t.Errorf("refusal: %v", err)
	}
	// A result the database rejects is EINVALID.
	_, err = s.ChangeCampaign(ctx, v.ID, func(w *seckill.Voucher) (seckill.AuditEntry, error) {
		w.Campaign.EndTime = w.Campaign.BeginTime
		return seckill.AuditEntry{Actor: "alice", Action: "bad"}, nil
	})
	if seckill.ErrorCode(err) != seckill.EINVALID {
		t.Errorf("window the database rejects: %v", err)
	}
	if _, err := s.ChangeCampaign(ctx, v.ID+1000, nil); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Errorf("missing voucher: %v", err)
	}

	entries, err := s.AuditLog(ctx, v.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Actor != "alice" || entries[0].Action != seckill.AuditEdit ||
		entries[0].Detail != "everything" || entries[0].VoucherID != v.ID || entries[0].At.IsZero() {
		t.Errorf("audit log %+v", entries)
	}
	if err := s.AddAudit(ctx, seckill.AuditEntry{VoucherID: v.ID, Actor: "bob", Action: seckill.AuditPause}); err != nil {
		t.Fatal(err)
	}
	if entries, _ = s.AuditLog(ctx, v.ID, 1); len(entries) != 1 || entries[0].Actor != "bob" {
		t.Errorf("newest entry first, limited: %+v", entries)
	}
}

// ChangeCampaign hands change the quiz as it stands and writes back the
// questions change leaves there: the same ones write nothing, others
// replace them, none delete them.
func TestChangeCampaignQuiz(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	q1 := []seckill.QuizQuestion{{Question: "What is two plus two?", Answers: []string{"4", "four"}}}
	v := storetest.CreateCampaign(t, db, 10, func(v *seckill.Voucher) {
		v.Campaign.Challenge, v.Campaign.Quiz = seckill.ChallengeQuiz, q1
	})
	change := func(edit func(c *seckill.Campaign)) []seckill.QuizQuestion {
		t.Helper()
		var seen []seckill.QuizQuestion
		_, err := s.ChangeCampaign(ctx, v.ID, func(w *seckill.Voucher) (seckill.AuditEntry, error) {
			seen = slices.Clone(w.Campaign.Quiz)
			edit(w.Campaign)
			return seckill.AuditEntry{Actor: "alice", Action: seckill.AuditGuard}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return seen
	}
	stored := func() []seckill.QuizQuestion {
		t.Helper()
		qs, err := s.CampaignQuiz(ctx, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		return qs
	}

	if diff := cmp.Diff(q1, change(func(c *seckill.Campaign) { c.Brake = 5 })); diff != "" {
		t.Errorf("change sees questions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(q1, stored()); diff != "" {
		t.Errorf("a change that leaves the quiz alone (-want +got):\n%s", diff)
	}
	q2 := []seckill.QuizQuestion{{Question: "  Capital of France? ", Answers: []string{" PARIS "}}}
	change(func(c *seckill.Campaign) { c.Quiz = q2 })
	want := []seckill.QuizQuestion{{Question: "Capital of France?", Answers: []string{"paris"}}}
	if diff := cmp.Diff(want, stored()); diff != "" {
		t.Errorf("replaced questions (-want +got):\n%s", diff)
	}
	// Choices are kept as written (trimmed: buyers see them), accepted
	// answers normalized.
	q3 := []seckill.QuizQuestion{
		{Question: "Capital of France?", Answers: []string{"Paris"}, Choices: []string{" Paris", "Lyon ", "Nice", "Lille"}},
		{Question: "Name a colour", Answers: []string{"red"}},
	}
	change(func(c *seckill.Campaign) { c.Quiz = q3 })
	want = []seckill.QuizQuestion{
		{Question: "Capital of France?", Answers: []string{"paris"}, Choices: []string{"Paris", "Lyon", "Nice", "Lille"}},
		{Question: "Name a colour", Answers: []string{"red"}},
	}
	if diff := cmp.Diff(want, stored()); diff != "" {
		t.Errorf("questions with choices (-want +got):\n%s", diff)
	}
	// The database holds a question to 4 to 10 choices, or none.
	_, err := s.ChangeCampaign(ctx, v.ID, func(w *seckill.Voucher) (seckill.AuditEntry, error) {
		w.Campaign.Quiz = []seckill.QuizQuestion{{Question: "Q", Answers: []string{"a"}, Choices: []string{"a", "b", "c"}}}
		return seckill.AuditEntry{Actor: "alice", Action: seckill.AuditGuard}, nil
	})
	if seckill.ErrorCode(err) != seckill.EINVALID {
		t.Errorf("three choices: %v, want INVALID_INPUT from the database", err)
	}
	change(func(c *seckill.Campaign) { c.Challenge, c.Quiz = seckill.ChallengeNone, nil })
	if got := stored(); len(got) != 0 {
		t.Errorf("questions after the quiz was removed: %+v", got)
	}
}

func TestCampaignsAndOrders(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	old := storetest.CreateCampaign(t, db, 5, func(v *seckill.Voucher) {
		v.Campaign.BeginTime = v.Campaign.BeginTime.Add(-5 * time.Hour)
		v.Campaign.EndTime = v.Campaign.EndTime.Add(-3 * time.Hour)
	})
	normal := &seckill.Voucher{ShopID: 1, Title: "plain", PayValue: 1, ActualValue: 1, Type: seckill.VoucherNormal}
	if err := s.CreateVoucher(ctx, normal); err != nil {
		t.Fatal(err)
	}
	v := storetest.CreateCampaign(t, db, 3)

	all, err := s.Campaigns(ctx, seckill.CampaignFilter{})
	if err != nil || len(all) != 2 || all[0].ID != v.ID || all[1].ID != old.ID || all[0].Campaign == nil {
		t.Fatalf("Campaigns = %+v, %v", all, err)
	}
	if page, _ := s.Campaigns(ctx, seckill.CampaignFilter{Before: v.ID}); len(page) != 1 || page[0].ID != old.ID {
		t.Errorf("before %d: %+v", v.ID, page)
	}
	if live, _ := s.Campaigns(ctx, seckill.CampaignFilter{EndedAfter: time.Now().Add(-time.Hour)}); len(live) != 1 || live[0].ID != v.ID {
		t.Errorf("ended after an hour ago: %+v", live)
	}

	// Three sold, one failed (user 1 twice), one failed for lack of stock.
	persist(t, s, adm(v.ID, 1, 1), adm(v.ID, 2, 2), adm(v.ID, 3, 1), adm(v.ID, 4, 3), adm(v.ID, 5, 4), adm(old.ID, 1, 1))
	totals, err := s.CampaignTotals(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if totals.OldestPayBy.IsZero() {
		t.Error("no oldest payBy among orders awaiting payment")
	}
	totals.OldestPayBy = time.Time{}
	if want := (seckill.CampaignTotals{InitialStock: 3, Stock: 0, Orders: 3, Failures: 2, Awaiting: 3}); totals != want {
		t.Errorf("CampaignTotals = %+v, want %+v", totals, want)
	}
	if _, err := s.CampaignTotals(ctx, normal.ID); seckill.ErrorCode(err) != seckill.ENOTFOUND {
		t.Errorf("totals of a NORMAL voucher: %v", err)
	}

	ids := func(orders []*seckill.Order) []int64 {
		out := []int64{}
		for _, o := range orders {
			out = append(out, o.ID&0xffffffff)
		}
		return out
	}
	for _, tt := range []struct {
		name string
		f    seckill.OrderFilter
		want []int64
	}{
		{"all, newest first", seckill.OrderFilter{}, []int64{5, 4, 3, 2, 1}},
		{"page", seckill.OrderFilter{Limit: 2}, []int64{5, 4}},
		{"next page", seckill.OrderFilter{Limit: 2, Before: seckill.OrderID(v.ID, 4)}, []int64{3, 2}},
		{"order id", seckill.OrderFilter{OrderID: seckill.OrderID(v.ID, 3)}, []int64{3}},
		{"another campaign's order", seckill.OrderFilter{OrderID: seckill.OrderID(old.ID, 1)}, []int64{}},
		{"user", seckill.OrderFilter{UserID: 1}, []int64{3, 1}},
		{"user, no orders", seckill.OrderFilter{UserID: 99}, []int64{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.f.VoucherID = v.ID
			got, err := s.CampaignOrders(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
				t.Errorf("CampaignOrders(%+v) (-want +got):\n%s", tt.f, diff)
			}
		})
	}
	got, _ := s.CampaignOrders(ctx, seckill.OrderFilter{VoucherID: v.ID, OrderID: seckill.OrderID(v.ID, 3)})
	if len(got) != 1 || got[0].Status != seckill.OrderFailed || got[0].FailureReason != store.ReasonUserHasOrder || got[0].UserID != 1 {
		t.Errorf("failed order %+v", got)
	}
}

// TestProviderAdmins keeps an identity provider's operators: one row per
// subject, created at first sign-in, renamed with the provider, never able
// to sign in with a password, and never taking a local operator's name.
func TestProviderAdmins(t *testing.T) {
	_, s := newStore(t)
	ops := operators(t, s)
	ctx := t.Context()
	if _, err := ops.CreateAdmin(ctx, "alice", "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	a, err := ops.ProviderAdmin(ctx, "https://idp.example", "sub-1", "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "sso:alice@example.com" {
		t.Errorf("name %q", a.Name)
	}
	again, err := ops.ProviderAdmin(ctx, "https://idp.example", "sub-1", "alice.renamed@example.com")
	if err != nil || again.ID != a.ID || again.Name != "sso:alice.renamed@example.com" {
		t.Errorf("second sign-in: %+v, %v; want id %d renamed", again, err, a.ID)
	}
	// Another subject with the same name gets a name of its own.
	other, err := ops.ProviderAdmin(ctx, "https://idp.example", "sub-2", "alice.renamed@example.com")
	if err != nil || other.ID == a.ID || !strings.HasPrefix(other.Name, seckill.ProviderAdminPrefix) || other.Name == again.Name {
		t.Errorf("same name, another subject: %+v, %v", other, err)
	}
	// The same subject at another issuer is another operator.
	elsewhere, err := ops.ProviderAdmin(ctx, "https://other.example", "sub-1", "bob")
	if err != nil || elsewhere.ID == a.ID {
		t.Errorf("another issuer: %+v, %v", elsewhere, err)
	}
	// No password opens a provider's operator.
	for _, pw := range []string{"", "correct horse battery"} {
		if _, err := ops.AuthenticateAdmin(ctx, again.Name, pw); seckill.ErrorCode(err) != seckill.EUNAUTHENTICATED {
			t.Errorf("password %q for a provider operator: %v, want UNAUTHENTICATED", pw, err)
		}
	}
	// Its sessions work as a local operator's.
	tok, _, err := ops.CreateAdminSession(ctx, a.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ops.AdminBySession(ctx, tok); err != nil || got.ID != a.ID {
		t.Errorf("session: %+v, %v", got, err)
	}
	long := strings.Repeat("x", 100)
	if a, err := ops.ProviderAdmin(ctx, "https://idp.example", "sub-3", long); err != nil || len(a.Name) != seckill.MaxAdminNameLen {
		t.Errorf("a long name: %+v, %v", a, err)
	}
}
