package seckill

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Admin is an operator of the dashboard.
type Admin struct {
	ID        int64
	Name      string
	CreatedAt time.Time
}

// Limits on operators' credentials. bcrypt reads at most 72 bytes.
const (
	MaxAdminNameLen      = 64
	MinAdminPasswordLen  = 12
	MaxAdminPasswordSize = 72
)

var adminNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]*$`)

// ValidateAdminName checks an operator's name: 1 to 64 letters, digits and
// ". _ @ -", starting with a letter or digit. EINVALID on field "user".
func ValidateAdminName(name string) error {
	if name == "" {
		return Invalidf("user", "user name is required")
	}
	if len(name) > MaxAdminNameLen || !adminNameRE.MatchString(name) {
		return Invalidf("user", "user name must be 1 to %d letters, digits or . _ @ -, starting with a letter or digit", MaxAdminNameLen)
	}
	return nil
}

// ValidateAdminPassword checks an operator's password: at least 12
// characters and at most 72 bytes. EINVALID on field "password".
func ValidateAdminPassword(password string) error {
	if utf8.RuneCountInString(password) < MinAdminPasswordLen {
		return Invalidf("password", "password must be at least %d characters", MinAdminPasswordLen)
	}
	if len(password) > MaxAdminPasswordSize {
		return Invalidf("password", "password must be at most %d bytes", MaxAdminPasswordSize)
	}
	return nil
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

// CampaignStore is what campaign management needs from the system of record.
type CampaignStore interface {
	// ChangeCampaign locks the campaign of a voucher, lets change modify the
	// voucher (texts) and its campaign (window, pause, stock, guard, and
	// the quiz: change finds the questions as they stand in Campaign.Quiz),
	// and writes the result together with the audit entry that change
	// returns, in one transaction. It returns the voucher as written. ENOTFOUND; an error
	// from change is returned as it is and nothing is written; EINVALID
	// when the database's rules reject the result.
	ChangeCampaign(ctx context.Context, voucherID int64, change func(v *Voucher) (AuditEntry, error)) (*Voucher, error)
	// AddAudit records an entry.
	AddAudit(ctx context.Context, e AuditEntry) error
}

// CampaignAdmitter is what campaign management needs from admission.
type CampaignAdmitter interface {
	// UpdateCampaign sets the window and the pause of a campaign admission
	// holds. ENOTFOUND when it does not hold it.
	UpdateCampaign(ctx context.Context, voucherID int64, begin, end time.Time, paused bool) error
	// AddStock puts n more units on sale. ENOTFOUND when admission does not
	// hold the campaign.
	AddStock(ctx context.Context, voucherID, n int64) error
	// UpdateGuard sets a campaign's challenge and brake in admission.
	UpdateGuard(ctx context.Context, voucherID int64, challenge ChallengeKind, brake int) error
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
func (s *Service) audit(ctx context.Context, u *User, voucherID int64, action, detail string) {
	if s.Campaigns == nil {
		return
	}
	e := AuditEntry{VoucherID: voucherID, Actor: actorName(u), Action: action, Detail: detail}
	if err := s.Campaigns.AddAudit(context.WithoutCancel(ctx), e); err != nil {
		s.Logger.ErrorContext(ctx, "record audit entry", "voucher_id", voucherID, "action", action, "err", err)
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
func (s *Service) UpdateCampaign(ctx context.Context, voucherID int64, e CampaignEdit) (*Voucher, error) {
	return s.manage(ctx, voucherID, AuditEdit, func(v *Voucher, now time.Time) (string, error) {
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
	}, s.applyWindow)
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

// Validate checks e, without changing it. EINVALID with the field.
func (e *GuardEdit) Validate() error {
	if err := checkPoWBits(e.PoWBits); err != nil {
		return err
	}
	if err := ValidateChallenge(e.Challenge, e.Difficulty(), e.Quiz); err != nil {
		return err
	}
	if e.Brake < 0 || e.Brake > MaxBrake {
		return Invalidf("brake", "brake must be between 0 (none) and %d admissions a second", MaxBrake)
	}
	return nil
}

// UpdateGuard changes a campaign's challenge (only before the sale starts)
// and its brake (until it ends), in Postgres and then in admission.
// EINVALID with the field; ECONFLICT for a challenge change once the sale
// has started, or any change once it has ended. Admins only.
func (s *Service) UpdateGuard(ctx context.Context, voucherID int64, e GuardEdit) (*Voucher, error) {
	if err := e.Validate(); err != nil {
		if _, aerr := requireAdmin(ctx); aerr != nil {
			return nil, aerr
		}
		return nil, err
	}
	bits := e.Difficulty()
	return s.manage(ctx, voucherID, AuditGuard, func(v *Voucher, now time.Time) (string, error) {
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
		s.settings.forget(v.ID)
		return detail, nil
	}, func(ctx context.Context, v *Voucher) error {
		return s.CampaignAdmitter.UpdateGuard(ctx, v.ID, v.Campaign.Challenge, v.Campaign.Brake)
	})
}

// PauseCampaign stops admission for a campaign that has not ended: every
// purchase is answered PAUSED until it is resumed. Pausing a paused campaign
// applies the pause to admission again. ECONFLICT once it has ended.
func (s *Service) PauseCampaign(ctx context.Context, voucherID int64) (*Voucher, error) {
	return s.setPaused(ctx, voucherID, true)
}

// ResumeCampaign lets a paused campaign admit again. ECONFLICT once it has
// ended.
func (s *Service) ResumeCampaign(ctx context.Context, voucherID int64) (*Voucher, error) {
	return s.setPaused(ctx, voucherID, false)
}

func (s *Service) setPaused(ctx context.Context, voucherID int64, paused bool) (*Voucher, error) {
	action := AuditResume
	if paused {
		action = AuditPause
	}
	return s.manage(ctx, voucherID, action, func(v *Voucher, now time.Time) (string, error) {
		if !now.Before(v.Campaign.EndTime) {
			return "", Errorf(ECONFLICT, "campaign %d has ended", v.ID)
		}
		detail := ""
		if v.Campaign.Paused == paused {
			detail = "applied again"
		}
		v.Campaign.Paused = paused
		return detail, nil
	}, s.applyWindow)
}

// EndCampaign ends a campaign now: its end becomes the current time (and
// its begin, if it had not begun, a millisecond before). ECONFLICT when it
// has ended already.
func (s *Service) EndCampaign(ctx context.Context, voucherID int64) (*Voucher, error) {
	return s.manage(ctx, voucherID, AuditEnd, func(v *Voucher, now time.Time) (string, error) {
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
	}, s.applyWindow)
}

// AddStock puts n more units of a campaign that has not ended on sale:
// Postgres counts them (initial stock and stock) first, then admission
// sells them. EINVALID (field "stock") unless 1 <= n and the campaign's
// stock stays at most MaxStock; ECONFLICT once it has ended.
func (s *Service) AddStock(ctx context.Context, voucherID, n int64) (*Voucher, error) {
	if n < MinStock || n > MaxStock {
		if _, err := requireAdmin(ctx); err != nil {
			return nil, err
		}
		return nil, Invalidf("stock", "stock to add must be between %d and %d", MinStock, MaxStock)
	}
	return s.manage(ctx, voucherID, AuditAddStock, func(v *Voucher, now time.Time) (string, error) {
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
		return s.CampaignAdmitter.AddStock(ctx, v.ID, n)
	})
}

// applyWindow gives admission the campaign's window and pause as Postgres
// now holds them.
func (s *Service) applyWindow(ctx context.Context, v *Voucher) error {
	c := v.Campaign
	return s.CampaignAdmitter.UpdateCampaign(ctx, v.ID, c.BeginTime, c.EndTime, c.Paused)
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
func (s *Service) manage(ctx context.Context, voucherID int64, action string,
	change func(v *Voucher, now time.Time) (string, error),
	apply func(ctx context.Context, v *Voucher) error,
) (*Voucher, error) {
	u, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if s.Campaigns == nil || s.CampaignAdmitter == nil {
		return nil, Errorf(EUNAVAILABLE, "campaign management is not available")
	}
	if voucherID <= 0 {
		return nil, Errorf(ENOTFOUND, "voucher %d not found", voucherID)
	}
	now := s.now()
	var before Voucher
	after, err := s.Campaigns.ChangeCampaign(ctx, voucherID, func(v *Voucher) (AuditEntry, error) {
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
		s.Logger.WarnContext(ctx, "admission does not hold the campaign; it takes the change when warmed",
			"voucher_id", voucherID, "action", action)
	default:
		s.Logger.ErrorContext(ctx, "admission did not take a campaign change; undoing it in Postgres",
			"voucher_id", voucherID, "action", action, "err", err)
		s.revert(ctx, u, &before, after, action)
		return nil, Errorf(EUNAVAILABLE, "admission is unavailable, so nothing was changed; try again")
	}
	if rem, err := s.Admitter.Remaining(ctx, []int64{voucherID}); err == nil {
		after.Campaign.Remaining, after.Campaign.RemainingKnown = rem[voucherID]
	}
	return after, nil
}

// revert undoes in Postgres what an action changed, when admission could not
// take it. Stock added is taken back as a difference: orders persisted
// meanwhile took their units from the old stock.
func (s *Service) revert(ctx context.Context, u *User, before, after *Voucher, action string) {
	ctx = context.WithoutCancel(ctx)
	added := after.Campaign.InitialStock - before.Campaign.InitialStock
	_, err := s.Campaigns.ChangeCampaign(ctx, before.ID, func(v *Voucher) (AuditEntry, error) {
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
	s.settings.forget(before.ID)
	if err != nil {
		// Postgres and admission disagree until an operator repeats the
		// action; the dashboard's consistency panel shows it.
		s.Logger.ErrorContext(ctx, "undo campaign change", "voucher_id", before.ID, "action", action, "err", err)
	}
}

// Limit is a budget of Burst attempts; one comes back every Every.
type Limit struct {
	Burst int
	Every time.Duration
}

// LoginLimits are the budgets of an admin's sign-in attempts, which the
// dashboard's in-memory limiter and the Redis one both take.
type LoginLimits struct {
	// PerPair is per client address and user name: one guesser at one
	// operator.
	PerPair Limit
	// PerAddress is per client address: one guesser at many names. A
	// proxy or an office shares one.
	PerAddress Limit
	// Failures are wrong passwords per user name from every address; when
	// spent, attempts on the name are slowed down (the dashboard's
	// LoginSlowDown), never refused.
	Failures Limit
}
