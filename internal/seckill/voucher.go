package seckill

import (
	"strings"
	"time"
	"unicode/utf8"
)

// VoucherType tells a plain voucher from one sold in a flash sale.
type VoucherType string

const (
	VoucherNormal  VoucherType = "NORMAL"
	VoucherSeckill VoucherType = "SECKILL"
)

// CampaignStatus is where a campaign stands at a moment; it is derived, not
// stored, except for the operator's pause.
type CampaignStatus string

const (
	CampaignScheduled CampaignStatus = "SCHEDULED"
	CampaignActive    CampaignStatus = "ACTIVE"
	CampaignSoldOut   CampaignStatus = "SOLD_OUT"
	CampaignEnded     CampaignStatus = "ENDED"
	CampaignPaused    CampaignStatus = "PAUSED"
)

// Limits on a new campaign, shared by every edge that creates one.
const (
	MaxTitleLen    = 255
	MaxSubTitleLen = 255
	MaxRulesLen    = 4096
	MinStock       = 1
	MaxStock       = 10_000_000
)

// Voucher is something a shop sells; a seckill voucher has a Campaign.
type Voucher struct {
	ID          int64
	ShopID      int64
	Title       string
	SubTitle    string
	Rules       string
	PayValue    int64 // cents the buyer pays
	ActualValue int64 // cents the voucher is worth
	Type        VoucherType
	CreatedAt   time.Time
	Campaign    *Campaign
}

// Campaign is the flash sale of one voucher.
type Campaign struct {
	VoucherID    int64
	InitialStock int64 // every unit ever put on sale (initial stock plus additions)
	Stock        int64 // units not yet persisted as orders, as Postgres counts them
	BeginTime    time.Time
	EndTime      time.Time
	Paused       bool
	CreatedAt    time.Time
	// Epoch is the order id epoch Redis admits in (see OrderID).
	Epoch int64
	// Challenge is what a buyer must solve first (challenge.go); PoWBits
	// its difficulty for PROOF_OF_WORK. Brake is the operator's ceiling on
	// admissions a second (0: none). Redis holds them with the campaign.
	Challenge ChallengeKind
	PoWBits   int
	Brake     int
	// Shards is the number of Redis stock shards the campaign sells from
	// (shards.go): 1 to MaxShards, fixed at creation; 0 reads as 1.
	Shards int
	// Room is the campaign's waiting room (waitingroom.go), fixed at
	// creation; the zero value is none. RoomDrawn is how many joined it
	// before the open, once a process recorded it at the open; -1 before.
	Room      WaitingRoom
	RoomDrawn int64
	// Quiz is the quiz's questions where a caller asked for them: creating
	// a campaign writes them; CampaignStore.ChangeCampaign hands its change
	// the questions as they stand and writes back what the change leaves
	// there; other reads leave it nil (Store.CampaignQuiz reads it).
	Quiz []QuizQuestion
	// PayWindow is how long a buyer has to pay an order.
	PayWindow time.Duration

	// Remaining is the live count in Redis; RemainingKnown is false when
	// Redis does not hold the campaign (not warmed yet).
	Remaining      int64
	RemainingKnown bool
}

// Sold is the number of orders persisted in Postgres.
func (c *Campaign) Sold() int64 { return c.InitialStock - c.Stock }

// LiveRemaining is the Redis count when known, else what Postgres has left.
func (c *Campaign) LiveRemaining() int64 {
	if c.RemainingKnown {
		return c.Remaining
	}
	return c.Stock
}

// StatusAt derives the campaign's status at now.
func (c *Campaign) StatusAt(now time.Time) CampaignStatus {
	switch {
	case !now.Before(c.EndTime):
		return CampaignEnded
	case c.Paused:
		return CampaignPaused
	case now.Before(c.BeginTime):
		return CampaignScheduled
	case c.LiveRemaining() <= 0:
		return CampaignSoldOut
	default:
		return CampaignActive
	}
}

// NewSeckillVoucher is the input to create a voucher with its campaign.
type NewSeckillVoucher struct {
	ShopID      int64
	Title       string
	SubTitle    string
	Rules       string
	PayValue    int64
	ActualValue int64
	Stock       int64
	BeginTime   time.Time
	EndTime     time.Time
	// Challenge is NONE when empty. PoWBits is the proof of work's
	// difficulty as the operator gave it: nil when omitted (DefaultPoWBits
	// for PROOF_OF_WORK); a given one must be MinPoWBits to MaxPoWBits, 0
	// included, and counts only for PROOF_OF_WORK. Quiz holds the
	// questions of a QUIZ.
	Challenge ChallengeKind
	PoWBits   *int
	Quiz      []QuizQuestion
	Brake     int
	// PayWindow is how long buyers have to pay; 0 takes the service's
	// default (SECKILL_PAY_WINDOW).
	PayWindow time.Duration
	// Shards is the number of Redis stock shards, 1 to MaxShards; 0 (not
	// given) is 1.
	Shards int
	// Room is the waiting room; the zero value is none. A PassFor of 0 takes
	// DefaultRoomPass.
	Room WaitingRoom
}

// Normalized returns in as a campaign holds it: the title trimmed, an
// empty challenge NONE, and PoWBits filled in for PROOF_OF_WORK (the
// default when omitted) and nil for the other kinds.
func (in NewSeckillVoucher) Normalized() NewSeckillVoucher {
	in.Title = strings.TrimSpace(in.Title)
	if in.Challenge == "" {
		in.Challenge = ChallengeNone
	}
	in.PoWBits = normalPoWBits(in.Challenge, in.PoWBits)
	if in.Shards == 0 {
		in.Shards = 1
	}
	if in.Room.Enabled() && in.Room.PassFor == 0 {
		in.Room.PassFor = DefaultRoomPass
	}
	return in
}

// Difficulty is the proof of work's difficulty a campaign made of in
// holds: 0 unless it is a PROOF_OF_WORK.
func (in NewSeckillVoucher) Difficulty() int {
	if b := normalPoWBits(in.Challenge, in.PoWBits); b != nil {
		return *b
	}
	return 0
}

// normalPoWBits is given as a campaign of kind holds it: the default when
// omitted for PROOF_OF_WORK, nil for other kinds.
func normalPoWBits(kind ChallengeKind, given *int) *int {
	switch {
	case kind != ChallengePoW:
		return nil
	case given == nil:
		b := DefaultPoWBits
		return &b
	}
	b := *given
	return &b
}

// checkPoWBits refuses a difficulty that was given outside its range:
// whatever the kind, since the operator asked for it.
func checkPoWBits(given *int) error {
	if given != nil && (*given < MinPoWBits || *given > MaxPoWBits) {
		return Invalidf("powBits", "powBits must be between %d and %d", MinPoWBits, MaxPoWBits)
	}
	return nil
}

// Validate checks every field of in as Normalized makes it, without
// changing in. It returns nil, or FieldErrors: one EINVALID error for each
// field that is wrong (in the order of the input's fields), naming it. now
// is the moment the campaign must end after.
func (in *NewSeckillVoucher) Validate(now time.Time) error {
	var errs FieldErrors
	n := in.Normalized()
	n.validate(now, &errs)
	errs.add(checkPoWBits(in.PoWBits))
	errs.add(ValidateChallenge(n.Challenge, n.Difficulty(), n.Quiz))
	return errs.err()
}

func (in *NewSeckillVoucher) validate(now time.Time, errs *FieldErrors) {
	if err := checkText("title", in.Title, false); err != nil {
		errs.add(err)
	} else if n := utf8.RuneCountInString(in.Title); n == 0 {
		errs.add(Invalidf("title", "title is required"))
	} else if n > MaxTitleLen {
		errs.add(Invalidf("title", "title must be at most %d characters", MaxTitleLen))
	}
	if err := checkText("subTitle", in.SubTitle, false); err != nil {
		errs.add(err)
	} else if utf8.RuneCountInString(in.SubTitle) > MaxSubTitleLen {
		errs.add(Invalidf("subTitle", "subTitle must be at most %d characters", MaxSubTitleLen))
	}
	if err := checkText("rules", in.Rules, true); err != nil {
		errs.add(err)
	} else if utf8.RuneCountInString(in.Rules) > MaxRulesLen {
		errs.add(Invalidf("rules", "rules must be at most %d characters", MaxRulesLen))
	}
	if in.ShopID <= 0 {
		errs.add(Invalidf("shopId", "shopId must be a positive integer"))
	}
	if in.PayValue < 0 {
		errs.add(Invalidf("payValue", "payValue must be 0 or more"))
	} else if in.ActualValue < in.PayValue {
		errs.add(Invalidf("actualValue", "actualValue must be at least payValue"))
	}
	if in.Stock < MinStock || in.Stock > MaxStock {
		errs.add(Invalidf("stock", "stock must be between %d and %d", MinStock, MaxStock))
	}
	if in.PayWindow != 0 && !ValidPayWindow(in.PayWindow) {
		errs.add(Invalidf("payWindow", "payWindow must be whole seconds between %v and %v", MinPayWindow, MaxPayWindow))
	}
	if in.BeginTime.IsZero() {
		errs.add(Invalidf("beginTime", "beginTime is required"))
	}
	switch {
	case in.EndTime.IsZero():
		errs.add(Invalidf("endTime", "endTime is required"))
	case !in.BeginTime.IsZero() && !in.EndTime.After(in.BeginTime):
		errs.add(Invalidf("endTime", "endTime must be after beginTime"))
	case !in.EndTime.After(now):
		errs.add(Invalidf("endTime", "endTime must be in the future"))
	}
	if in.Brake < 0 || in.Brake > MaxBrake {
		errs.add(Invalidf("brake", "brake must be between 0 (none) and %d admissions a second", MaxBrake))
	}
	errs.add(CheckShards(in.Shards))
	if err := ValidateWaitingRoom(in.Room); err != nil {
		errs.add(err)
	}
}

// CheckShards refuses a number of stock shards outside 1 to MaxShards. An
// edge that tells a given 0 from an omitted field checks a given one with
// it, since Normalized reads 0 as "not given".
func CheckShards(n int) error {
	if n < 1 || n > MaxShards {
		return Invalidf("shards", "shards must be between 1 and %d", MaxShards)
	}
	return nil
}

// ValidPayWindow reports whether d is a pay window a campaign may have:
// whole seconds from MinPayWindow to MaxPayWindow.
func ValidPayWindow(d time.Duration) bool {
	return d >= MinPayWindow && d <= MaxPayWindow && d%time.Second == 0
}

// MaxBrake bounds a campaign's ceiling on admissions a second.
const MaxBrake = 1_000_000

// VoucherFilter pages through vouchers in id order.
type VoucherFilter struct {
	First int   // at most this many; 0 means the default
	After int64 // ids greater than this
}

// Page size limits for lists.
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
)
