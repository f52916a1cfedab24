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
	// Challenge is NONE when empty; PoWBits defaults to DefaultPoWBits
	// for PROOF_OF_WORK; Quiz holds the questions of a QUIZ.
	Challenge ChallengeKind
	PoWBits   int
	Quiz      []QuizQuestion
	Brake     int
	// PayWindow is how long buyers have to pay; 0 takes the service's
	// default (SECKILL_PAY_WINDOW).
	PayWindow time.Duration
}

// Validate checks every field and returns the first EINVALID error, naming
// the field. now is the moment the campaign must end after.
func (in *NewSeckillVoucher) Validate(now time.Time) error {
	in.Title = strings.TrimSpace(in.Title)
	if err := checkText("title", in.Title, false); err != nil {
		return err
	}
	switch n := utf8.RuneCountInString(in.Title); {
	case n == 0:
		return Invalidf("title", "title is required")
	case n > MaxTitleLen:
		return Invalidf("title", "title must be at most %d characters", MaxTitleLen)
	}
	if in.ShopID <= 0 {
		return Invalidf("shopId", "shopId must be a positive integer")
	}
	if err := checkText("subTitle", in.SubTitle, false); err != nil {
		return err
	}
	if err := checkText("rules", in.Rules, true); err != nil {
		return err
	}
	if utf8.RuneCountInString(in.SubTitle) > MaxSubTitleLen {
		return Invalidf("subTitle", "subTitle must be at most %d characters", MaxSubTitleLen)
	}
	if utf8.RuneCountInString(in.Rules) > MaxRulesLen {
		return Invalidf("rules", "rules must be at most %d characters", MaxRulesLen)
	}
	if in.PayValue < 0 {
		return Invalidf("payValue", "payValue must be 0 or more")
	}
	if in.ActualValue < in.PayValue {
		return Invalidf("actualValue", "actualValue must be at least payValue")
	}
	if in.Stock < MinStock || in.Stock > MaxStock {
		return Invalidf("stock", "stock must be between %d and %d", MinStock, MaxStock)
	}
	if in.PayWindow != 0 && (in.PayWindow < MinPayWindow || in.PayWindow > MaxPayWindow || in.PayWindow%time.Second != 0) {
		return Invalidf("payWindow", "payWindow must be whole seconds between %v and %v", MinPayWindow, MaxPayWindow)
	}
	if in.BeginTime.IsZero() {
		return Invalidf("beginTime", "beginTime is required")
	}
	if !in.EndTime.After(in.BeginTime) {
		return Invalidf("endTime", "endTime must be after beginTime")
	}
	if !in.EndTime.After(now) {
		return Invalidf("endTime", "endTime must be in the future")
	}
	if in.Challenge == "" {
		in.Challenge = ChallengeNone
	}
	if in.Challenge == ChallengePoW && in.PoWBits == 0 {
		in.PoWBits = DefaultPoWBits
	}
	if in.Brake < 0 || in.Brake > MaxBrake {
		return Invalidf("brake", "brake must be between 0 (none) and %d admissions a second", MaxBrake)
	}
	return ValidateChallenge(in.Challenge, in.PoWBits, in.Quiz)
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
