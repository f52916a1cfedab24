package seckill

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Catalog is the vouchers and their campaigns: creating them, reading them
// with their live stock, and an operator's changes (window, pause, stock,
// challenge and brake), each recorded in the audit log.
type Catalog struct {
	store      CatalogStore
	auditor    Auditor
	admission  CampaignAdmitter
	remaining  Admitter // the live stock of campaigns
	challenges *Challenges
	logger     *slog.Logger
	now        func() time.Time
	payWindow  time.Duration
}

// CatalogDeps are what the Catalog needs; every field is required.
type CatalogDeps struct {
	Store     CatalogStore
	Auditor   Auditor
	Admission CampaignAdmitter
	Admitter  Admitter // reads the campaigns' live stock
	// Challenges forgets a campaign's cached challenge settings when an
	// operator changes them.
	Challenges *Challenges
	Logger     *slog.Logger
	Now        func() time.Time
	// PayWindow is the pay window of a campaign that sets none
	// (SECKILL_PAY_WINDOW); 0 means DefaultPayWindow.
	PayWindow time.Duration
}

// NewCatalog returns the catalog over its dependencies; it refuses to build
// without any of them.
func NewCatalog(d CatalogDeps) (*Catalog, error) {
	if err := required("the catalog", map[string]bool{
		"Store": d.Store == nil, "Auditor": d.Auditor == nil, "Admission": d.Admission == nil, "Admitter": d.Admitter == nil,
		"Challenges": d.Challenges == nil, "Logger": d.Logger == nil, "Now": d.Now == nil,
	}); err != nil {
		return nil, err
	}
	return &Catalog{store: d.Store, auditor: d.Auditor, admission: d.Admission, remaining: d.Admitter,
		challenges: d.Challenges, logger: d.Logger, now: d.Now, payWindow: cmp.Or(d.PayWindow, DefaultPayWindow)}, nil
}

// Audit actions.
const (
	AuditCreate   = "create"
	AuditEdit     = "edit"
	AuditPause    = "pause"
	AuditResume   = "resume"
	AuditEnd      = "end"
	AuditAddStock = "add_stock"
	AuditGuard    = "guard"
	// AuditRevert records that a change was undone in Postgres because
	// admission (Redis) could not take it.
	AuditRevert = "revert"
)

// AuditEntry records who changed what of a campaign, and when.
type AuditEntry struct {
	ID        int64
	VoucherID int64
	Actor     string
	Action    string
	Detail    string
	At        time.Time
}

// CampaignEdit is what an operator may change before a campaign starts.
type CampaignEdit struct {
	Title     string
	SubTitle  string
	Rules     string
	BeginTime time.Time
	EndTime   time.Time
}

// LiveCounts is what admission (Redis) holds for a campaign: units left and
// admissions not yet persisted. Known is false when Redis does not hold the
// campaign.
type LiveCounts struct {
	Remaining int64
	Queued    int64
	Known     bool
	// Shards holds each stock shard's own numbers, for a campaign of more
	// than one (nil otherwise); Remaining and Queued are their sums.
	Shards []ShardLive
	// Recount is set while units of shards rebuilt alone (their master
	// failed over) are still to be counted back from Postgres: Remaining
	// lacks them until nothing is left elsewhere and the campaign is
	// rebuilt whole.
	Recount bool
}

// ShardLive is one stock shard's live numbers (admission's Redis): its
// units left (those on their way out of it included, until the recipient
// has them in its own) and pending admissions, and how many admissions it
// made in its epoch (its sequence).
type ShardLive struct {
	Remaining, Queued int64
	Epoch, Admitted   int64
	Known             bool
}

// CampaignTotals is what Postgres holds for a campaign, read in one
// snapshot: units ever put on sale, units not yet sold, and the rows of
// voucher_order (Orders) and order_failure (Failures).
type CampaignTotals struct {
	InitialStock int64
	Stock        int64
	Orders       int64 // orders holding a unit: awaiting payment or paid
	Failures     int64

	// The order's life after the purchase (life.go).
	Awaiting    int64     // CREATED: awaiting payment
	Paid        int64     // PAID
	Cancelled   int64     // CANCELLED: their units went back on sale
	Expired     int64     // EXPIRED: their units went back on sale
	Revenue     int64     // cents paid
	OldestPayBy time.Time // the earliest payBy of an order awaiting payment; zero when none
}

// CampaignFilter pages through seckill campaigns, newest first.
type CampaignFilter struct {
	Before     int64     // voucher ids below this; 0 means from the newest
	Limit      int       // at most this many; 0 means DefaultPageSize
	EndedAfter time.Time // only campaigns ending after this, when set
}

// OrderFilter pages through a campaign's persisted orders, newest first.
type OrderFilter struct {
	VoucherID int64
	OrderID   int64 // only this order, when set
	UserID    int64 // only this user's orders, when set
	Before    int64 // order ids below this; 0 means from the newest
	Limit     int   // at most this many; 0 means DefaultPageSize
	// Status keeps only orders in this status, when set (QUEUED matches
	// none: those are not persisted).
	Status OrderStatus
}

// AddSeckillVoucher creates a voucher with its campaign in Postgres and warms
// it into Redis before returning, so it can be bought at once. Admins only.
func (k *Catalog) AddSeckillVoucher(ctx context.Context, in NewSeckillVoucher) (*Voucher, error) {
	u, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if err := in.Validate(k.now()); err != nil {
		return nil, err
	}
	in = in.Normalized()
	v := &Voucher{
		ShopID: in.ShopID, Title: in.Title, SubTitle: in.SubTitle, Rules: in.Rules,
		PayValue: in.PayValue, ActualValue: in.ActualValue, Type: VoucherSeckill,
		Campaign: &Campaign{
			InitialStock: in.Stock, Stock: in.Stock,
			BeginTime: in.BeginTime.UTC(), EndTime: in.EndTime.UTC(),
			Challenge: in.Challenge, PoWBits: in.Difficulty(), Quiz: in.Quiz, Brake: in.Brake,
			PayWindow: cmp.Or(in.PayWindow, k.payWindow), Shards: in.Shards,
			Room: in.Room, RoomDrawn: -1,
		},
	}
	if err := k.store.CreateVoucher(ctx, v); err != nil {
		return nil, fmt.Errorf("create voucher: %w", err)
	}
	if _, err := k.admission.Warm(ctx, WarmState{Campaign: *v.Campaign}); err != nil {
		// A campaign that Redis does not know cannot be sold; undo it so the
		// admin can simply try again.
		if derr := k.store.DeleteVoucher(context.WithoutCancel(ctx), v.ID); derr != nil {
			k.logger.ErrorContext(ctx, "undo voucher after failed warm", "voucher_id", v.ID, "err", derr)
		}
		return nil, fmt.Errorf("warm campaign %d: %w", v.ID, err)
	}
	v.Campaign.Remaining, v.Campaign.RemainingKnown = v.Campaign.Stock, true
	k.audit(ctx, u, v.ID, AuditCreate, createdDetail(v))
	return v, nil
}

// Voucher returns one voucher with its live stock. Anyone may read it.
func (k *Catalog) Voucher(ctx context.Context, id int64) (*Voucher, error) {
	if id <= 0 {
		return nil, Errorf(ENOTFOUND, "voucher %d not found", id)
	}
	v, err := k.store.Voucher(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := k.fillRemaining(ctx, []*Voucher{v}); err != nil {
		return nil, err
	}
	return v, nil
}

// Vouchers pages through vouchers in id order, with their live stock.
func (k *Catalog) Vouchers(ctx context.Context, f VoucherFilter) ([]*Voucher, error) {
	switch {
	case f.First == 0:
		f.First = DefaultPageSize
	case f.First < 0 || f.First > MaxPageSize:
		return nil, Invalidf("first", "first must be between 1 and %d", MaxPageSize)
	}
	if f.After < 0 {
		return nil, Invalidf("after", "after must be a voucher id")
	}
	vs, err := k.store.Vouchers(ctx, f)
	if err != nil {
		return nil, err
	}
	if err := k.fillRemaining(ctx, vs); err != nil {
		return nil, err
	}
	return vs, nil
}

func (k *Catalog) fillRemaining(ctx context.Context, vs []*Voucher) error {
	ids := make([]int64, 0, len(vs))
	for _, v := range vs {
		if v.Campaign != nil {
			ids = append(ids, v.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rem, err := k.remaining.Remaining(ctx, ids)
	if err != nil {
		return fmt.Errorf("remaining stock: %w", err)
	}
	for _, v := range vs {
		if v.Campaign == nil {
			continue
		}
		v.Campaign.Remaining, v.Campaign.RemainingKnown = rem[v.ID]
	}
	return nil
}

// actorName is how the audit log names a user.
func actorName(u *User) string {
	if u.Name != "" {
		return u.Name
	}
	return fmt.Sprintf("token user %d", u.ID)
}

// audit records an entry; a failure is logged, not returned, because the
// change it describes has happened.
func (k *Catalog) audit(ctx context.Context, u *User, voucherID int64, action, detail string) {
	record(ctx, k.auditor, k.logger, u, voucherID, action, detail)
}

// record writes an audit entry; a failure is logged, not returned, because
// the change it describes has happened.
func record(ctx context.Context, a Auditor, logger *slog.Logger, u *User, voucherID int64, action, detail string) {
	e := AuditEntry{VoucherID: voucherID, Actor: actorName(u), Action: action, Detail: detail}
	if err := a.AddAudit(context.WithoutCancel(ctx), e); err != nil {
		logger.ErrorContext(ctx, "record audit entry", "voucher_id", voucherID, "action", action, "err", err)
	}
}

const auditTime = "2006-01-02 15:04:05Z07:00"

func createdDetail(v *Voucher) string {
	return fmt.Sprintf("title %q, stock %d, %s to %s", v.Title, v.Campaign.InitialStock,
		v.Campaign.BeginTime.UTC().Format(auditTime), v.Campaign.EndTime.UTC().Format(auditTime))
}

// UpdateCampaign changes the texts and the window of a campaign that has not
// started yet, in Postgres and then in admission. The input is validated as
// a new campaign's is (EINVALID with the field, the same messages);
// ECONFLICT once the campaign has started. Admins only.
func (k *Catalog) UpdateCampaign(ctx context.Context, voucherID int64, e CampaignEdit) (*Voucher, error) {
	return k.manage(ctx, voucherID, AuditEdit, func(v *Voucher, now time.Time) (string, error) {
		c := v.Campaign
		if !now.Before(c.BeginTime) {
			return "", Errorf(ECONFLICT, "campaign %d has started: it can only be paused, resumed, ended or given more stock", v.ID)
		}
		in := NewSeckillVoucher{
			ShopID: v.ShopID, Title: e.Title, SubTitle: e.SubTitle, Rules: e.Rules,
			PayValue: v.PayValue, ActualValue: v.ActualValue, Stock: max(c.InitialStock, MinStock),
			BeginTime: e.BeginTime, EndTime: e.EndTime,
		}
		if err := in.Validate(now); err != nil {
			return "", err
		}
		in = in.Normalized()
		var changes []string
		diff := func(name, from, to string) {
			if from != to {
				changes = append(changes, fmt.Sprintf("%s %q → %q", name, from, to))
			}
		}
		diff("title", v.Title, in.Title)
		diff("subTitle", v.SubTitle, in.SubTitle)
		diff("rules", v.Rules, in.Rules)
		begin, end := in.BeginTime.UTC().Truncate(time.Microsecond), in.EndTime.UTC().Truncate(time.Microsecond)
		diff("beginTime", c.BeginTime.Format(auditTime), begin.Format(auditTime))
		diff("endTime", c.EndTime.Format(auditTime), end.Format(auditTime))
		v.Title, v.SubTitle, v.Rules = in.Title, in.SubTitle, in.Rules
		c.BeginTime, c.EndTime = begin, end
		if len(changes) == 0 {
			return "no change", nil
		}
		return strings.Join(changes, "; "), nil
	}, k.applyWindow)
}

// GuardEdit is a campaign's challenge and brake as an operator sets them.
// PoWBits is as in NewSeckillVoucher: nil when omitted (the default for
// PROOF_OF_WORK), a given one 1 to 32. Quiz replaces the questions when
// the challenge is QUIZ.
type GuardEdit struct {
	Challenge ChallengeKind
	PoWBits   *int
	Quiz      []QuizQuestion
	Brake     int
}

// Difficulty is the proof of work's difficulty the campaign holds after
// e: 0 unless it is a PROOF_OF_WORK.
func (e GuardEdit) Difficulty() int {
	if b := normalPoWBits(e.Challenge, e.PoWBits); b != nil {
		return *b
	}
	return 0
}

// Validate checks e, without changing it: nil, or FieldErrors naming each
// field that is wrong.
func (e *GuardEdit) Validate() error {
	var errs FieldErrors
	errs.add(checkPoWBits(e.PoWBits))
	errs.add(ValidateChallenge(e.Challenge, e.Difficulty(), e.Quiz))
	if e.Brake < 0 || e.Brake > MaxBrake {
		errs.add(Invalidf("brake", "brake must be between 0 (none) and %d admissions a second", MaxBrake))
	}
	return errs.err()
}

// UpdateGuard changes a campaign's challenge (only before the sale starts)
// and its brake (until it ends), in Postgres and then in admission.
// EINVALID with the field; ECONFLICT for a challenge change once the sale
// has started, or any change once it has ended. Admins only.
func (k *Catalog) UpdateGuard(ctx context.Context, voucherID int64, e GuardEdit) (*Voucher, error) {
	if err := e.Validate(); err != nil {
		if _, aerr := requireAdmin(ctx); aerr != nil {
			return nil, aerr
		}
		return nil, err
	}
	bits := e.Difficulty()
	return k.manage(ctx, voucherID, AuditGuard, func(v *Voucher, now time.Time) (string, error) {
		c := v.Campaign
		if !now.Before(c.EndTime) {
			return "", Errorf(ECONFLICT, "campaign %d has ended", v.ID)
		}
		challengeChanged := c.Challenge != e.Challenge || c.PoWBits != bits || e.Challenge == ChallengeQuiz
		if challengeChanged && !now.Before(c.BeginTime) {
			return "", Invalidf("challenge", "the challenge can only change before the sale starts")
		}
		detail := fmt.Sprintf("challenge %s → %s", c.Challenge, e.Challenge)
		if e.Challenge == ChallengePoW {
			detail += fmt.Sprintf(" (%d bits)", bits)
		}
		if e.Challenge == ChallengeQuiz {
			detail += fmt.Sprintf(" (%d questions)", len(e.Quiz))
		}
		detail += fmt.Sprintf("; brake %d → %d a second", c.Brake, e.Brake)
		if now.Before(c.BeginTime) {
			c.Challenge, c.PoWBits, c.Quiz = e.Challenge, bits, e.Quiz
		}
		c.Brake = e.Brake
		k.challenges.forget(v.ID)
		return detail, nil
	}, func(ctx context.Context, v *Voucher) error {
		return k.admission.UpdateGuard(ctx, v.ID, v.Campaign.Challenge, v.Campaign.Brake)
	})
}

// PauseCampaign stops admission for a campaign that has not ended: every
// purchase is answered PAUSED until it is resumed. Pausing a paused campaign
// applies the pause to admission again. ECONFLICT once it has ended.
func (k *Catalog) PauseCampaign(ctx context.Context, voucherID int64) (*Voucher, error) {
	return k.setPaused(ctx, voucherID, true)
}

// ResumeCampaign lets a paused campaign admit again. ECONFLICT once it has
// ended.
func (k *Catalog) ResumeCampaign(ctx context.Context, voucherID int64) (*Voucher, error) {
	return k.setPaused(ctx, voucherID, false)
}

func (k *Catalog) setPaused(ctx context.Context, voucherID int64, paused bool) (*Voucher, error) {
	action := AuditResume
	if paused {
		action = AuditPause
	}
	return k.manage(ctx, voucherID, action, func(v *Voucher, now time.Time) (string, error) {
		if !now.Before(v.Campaign.EndTime) {
			return "", Errorf(ECONFLICT, "campaign %d has ended", v.ID)
		}
		detail := ""
		if v.Campaign.Paused == paused {
			detail = "applied again"
		}
		v.Campaign.Paused = paused
		return detail, nil
	}, k.applyWindow)
}

// EndCampaign ends a campaign now: its end becomes the current time (and
// its begin, if it had not begun, a millisecond before). ECONFLICT when it
// has ended already.
func (k *Catalog) EndCampaign(ctx context.Context, voucherID int64) (*Voucher, error) {
	return k.manage(ctx, voucherID, AuditEnd, func(v *Voucher, now time.Time) (string, error) {
		c := v.Campaign
		if !now.Before(c.EndTime) {
			return "", Errorf(ECONFLICT, "campaign %d has ended already", v.ID)
		}
		// Admission keeps milliseconds and needs begin < end.
		end := now.UTC().Truncate(time.Millisecond)
		detail := fmt.Sprintf("endTime %s → %s", c.EndTime.Format(auditTime), end.Format(auditTime))
		if !c.BeginTime.Before(end) {
			begin := end.Add(-time.Millisecond)
			detail += fmt.Sprintf("; beginTime %s → %s (it had not begun)", c.BeginTime.Format(auditTime), begin.Format(auditTime))
			c.BeginTime = begin
		}
		c.EndTime = end
		return detail, nil
	}, k.applyWindow)
}

// AddStock puts n more units of a campaign that has not ended on sale:
// Postgres counts them (initial stock and stock) first, then admission
// sells them. EINVALID (field "stock") unless 1 <= n and the campaign's
// stock stays at most MaxStock; ECONFLICT once it has ended.
func (k *Catalog) AddStock(ctx context.Context, voucherID, n int64) (*Voucher, error) {
	if n < MinStock || n > MaxStock {
		if _, err := requireAdmin(ctx); err != nil {
			return nil, err
		}
		return nil, Invalidf("stock", "stock to add must be between %d and %d", MinStock, MaxStock)
	}
	return k.manage(ctx, voucherID, AuditAddStock, func(v *Voucher, now time.Time) (string, error) {
		c := v.Campaign
		if !now.Before(c.EndTime) {
			return "", Errorf(ECONFLICT, "campaign %d has ended", v.ID)
		}
		if c.InitialStock+n > MaxStock {
			return "", Invalidf("stock", "stock must be between %d and %d", MinStock, MaxStock)
		}
		c.InitialStock += n
		c.Stock += n
		return fmt.Sprintf("+%d units: stock %d → %d", n, c.InitialStock-n, c.InitialStock), nil
	}, func(ctx context.Context, v *Voucher) error {
		return k.admission.AddStock(ctx, v.ID, n)
	})
}

// applyWindow gives admission the campaign's window and pause as Postgres
// now holds them.
func (k *Catalog) applyWindow(ctx context.Context, v *Voucher) error {
	c := v.Campaign
	return k.admission.UpdateCampaign(ctx, v.ID, c.BeginTime, c.EndTime, c.Paused)
}

// manage runs one management action: change edits the voucher under the
// campaign's lock in Postgres, which records the audit entry in the same
// transaction; apply then takes the result to admission at once.
//
// Postgres changes first because it is the source of truth: a campaign that
// admission lost is rebuilt from it. When admission is unreachable after
// Postgres changed, the change is undone in Postgres (and the undo audited),
// so the two never disagree for long and the operator may simply try again;
// the caller gets EUNAVAILABLE. A campaign admission does not hold (it was
// never warmed, or Redis lost it) takes the change when it is warmed.
func (k *Catalog) manage(ctx context.Context, voucherID int64, action string,
	change func(v *Voucher, now time.Time) (string, error),
	apply func(ctx context.Context, v *Voucher) error,
) (*Voucher, error) {
	u, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if voucherID <= 0 {
		return nil, Errorf(ENOTFOUND, "voucher %d not found", voucherID)
	}
	now := k.now()
	var before Voucher
	after, err := k.store.ChangeCampaign(ctx, voucherID, func(v *Voucher) (AuditEntry, error) {
		if v.Campaign == nil {
			return AuditEntry{}, Errorf(ENOTFOUND, "voucher %d has no campaign", voucherID)
		}
		before = *v
		c := *v.Campaign
		c.Quiz = slices.Clone(c.Quiz)
		before.Campaign = &c
		detail, err := change(v, now)
		if err != nil {
			return AuditEntry{}, err
		}
		return AuditEntry{VoucherID: voucherID, Actor: actorName(u), Action: action, Detail: detail}, nil
	})
	if err != nil {
		return nil, err
	}

	err = apply(ctx, after)
	switch {
	case err == nil:
	case ErrorCode(err) == ENOTFOUND:
		k.logger.WarnContext(ctx, "admission does not hold the campaign; it takes the change when warmed",
			"voucher_id", voucherID, "action", action)
	default:
		k.logger.ErrorContext(ctx, "admission did not take a campaign change; undoing it in Postgres",
			"voucher_id", voucherID, "action", action, "err", err)
		k.revert(ctx, u, &before, after, action)
		return nil, Errorf(EUNAVAILABLE, "admission is unavailable, so nothing was changed; try again")
	}
	if rem, err := k.remaining.Remaining(ctx, []int64{voucherID}); err == nil {
		after.Campaign.Remaining, after.Campaign.RemainingKnown = rem[voucherID]
	}
	return after, nil
}

// revert undoes in Postgres what an action changed, when admission could not
// take it. Stock added is taken back as a difference: orders persisted
// meanwhile took their units from the old stock.
func (k *Catalog) revert(ctx context.Context, u *User, before, after *Voucher, action string) {
	ctx = context.WithoutCancel(ctx)
	added := after.Campaign.InitialStock - before.Campaign.InitialStock
	_, err := k.store.ChangeCampaign(ctx, before.ID, func(v *Voucher) (AuditEntry, error) {
		if v.Campaign == nil {
			return AuditEntry{}, Errorf(ENOTFOUND, "voucher %d has no campaign", before.ID)
		}
		c := v.Campaign
		if added > 0 {
			if c.Stock < added {
				return AuditEntry{}, Errorf(ECONFLICT, "stock %d is below the %d units to take back", c.Stock, added)
			}
			c.InitialStock -= added
			c.Stock -= added
		} else {
			v.Title, v.SubTitle, v.Rules = before.Title, before.SubTitle, before.Rules
			c.BeginTime, c.EndTime, c.Paused = before.Campaign.BeginTime, before.Campaign.EndTime, before.Campaign.Paused
			c.Challenge, c.PoWBits, c.Brake = before.Campaign.Challenge, before.Campaign.PoWBits, before.Campaign.Brake
			c.Quiz = before.Campaign.Quiz
		}
		return AuditEntry{VoucherID: before.ID, Actor: actorName(u), Action: AuditRevert,
			Detail: fmt.Sprintf("%s undone: admission was unavailable", action)}, nil
	})
	k.challenges.forget(before.ID)
	if err != nil {
		// Postgres and admission disagree until an operator repeats the
		// action; the dashboard's consistency panel shows it.
		k.logger.ErrorContext(ctx, "undo campaign change", "voucher_id", before.ID, "action", action, "err", err)
	}
}

// CampaignQuiz returns a campaign's quiz questions with their accepted
// answers. Admins only.
func (k *Catalog) CampaignQuiz(ctx context.Context, voucherID int64) ([]QuizQuestion, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	return k.store.CampaignQuiz(ctx, voucherID)
}
