package store

import (
	"strings"
	"time"

	"github.com/uptrace/bun"

	"seckill/internal/seckill"
)

// timestamps are the created_at and updated_at columns of the tables whose
// rows change after their insert: both default to the insert's time, and
// each change sets updated_at = now().
type timestamps struct {
	CreatedAt time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	UpdatedAt time.Time `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
}

// voucherRow is a row of voucher; Campaign is loaded with a LEFT JOIN and
// stays empty for NORMAL vouchers.
type voucherRow struct {
	bun.BaseModel `bun:"table:voucher,alias:v"`

	ID          int64  `bun:"id,pk,autoincrement"`
	ShopID      int64  `bun:"shop_id,notnull"`
	Title       string `bun:"title,notnull"`
	SubTitle    string `bun:"sub_title,notnull"`
	Rules       string `bun:"rules,notnull"`
	PayValue    int64  `bun:"pay_value,notnull"`
	ActualValue int64  `bun:"actual_value,notnull"`
	Type        string `bun:"type,notnull"`
	timestamps

	Campaign *campaignRow `bun:"rel:has-one,join:id=voucher_id"`
}

// campaignRow is a row of seckill_campaign.
type campaignRow struct {
	bun.BaseModel `bun:"table:seckill_campaign,alias:c"`

	VoucherID    int64     `bun:"voucher_id,pk"`
	InitialStock int64     `bun:"initial_stock,notnull"`
	Stock        int64     `bun:"stock,notnull"`
	BeginTime    time.Time `bun:"begin_time,notnull"`
	EndTime      time.Time `bun:"end_time,notnull"`
	Paused       bool      `bun:"paused,notnull"`
	Epoch        int64     `bun:"epoch,notnull"`
	Challenge    string    `bun:"challenge,nullzero,notnull,default:'NONE'"`
	PoWBits      int       `bun:"pow_bits,notnull"`
	Brake        int       `bun:"brake,notnull"`
	PayWindow    int64     `bun:"pay_window_seconds,nullzero,notnull,default:900"`
	Shards       int       `bun:"shards,nullzero,notnull,default:1"`
	ShardEpochs  []int64   `bun:"shard_epochs,array"`
	RoomOpens    int64     `bun:"room_opens_before_seconds,notnull"`
	RoomRate     int       `bun:"room_admit_per_second,notnull"`
	RoomPass     int64     `bun:"room_pass_seconds,notnull"`
	RoomDrawn    *int64    `bun:"room_drawn"`
	timestamps
}

// quizRow is a row of campaign_quiz.
type quizRow struct {
	bun.BaseModel `bun:"table:campaign_quiz,alias:q"`

	VoucherID int64    `bun:"voucher_id,pk"`
	Position  int      `bun:"position,pk"`
	Question  string   `bun:"question,notnull"`
	Answers   []string `bun:"answers,array,notnull"`
	Choices   []string `bun:"choices,array,notnull"` // empty: a free answer
}

// admissionCols are the columns voucher_order and order_failure share: the
// admission a row records, whichever way it ended.
type admissionCols struct {
	ID         int64     `bun:"id,pk"`
	UserID     int64     `bun:"user_id,notnull"`
	VoucherID  int64     `bun:"voucher_id,notnull"`
	AdmittedAt time.Time `bun:"admitted_at,notnull"`
}

// orderRow is a row of voucher_order.
type orderRow struct {
	bun.BaseModel `bun:"table:voucher_order,alias:o"`
	admissionCols

	Status    string    `bun:"status,nullzero,notnull,default:'CREATED'"`
	CreatedAt time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp"`
}

// failureRow is a row of order_failure.
type failureRow struct {
	bun.BaseModel `bun:"table:order_failure,alias:f"`
	admissionCols

	Reason   string    `bun:"reason,notnull"`
	FailedAt time.Time `bun:"failed_at,nullzero,notnull,default:current_timestamp"`
}

// orderView is an order read from either voucher_order or order_failure.
type orderView struct {
	ID        int64     `bun:"id"`
	VoucherID int64     `bun:"voucher_id"`
	UserID    int64     `bun:"user_id"`
	Status    string    `bun:"status"`
	At        time.Time `bun:"at"` // created_at, or failed_at for a failure
	Reason    string    `bun:"reason"`
	Amount    int64     `bun:"amount"`
	PayBy     time.Time `bun:"pay_by"`
	PaidAt    time.Time `bun:"paid_at"`
	ClosedAt  time.Time `bun:"closed_at"`
}

// orderColumns and failureColumns select an orderView from voucher_order
// and order_failure, so that a UNION of both reads one shape.
const (
	orderColumns   = `id, voucher_id, user_id, status, created_at AS at, '' AS reason, amount, pay_by, paid_at, closed_at`
	failureColumns = `id, voucher_id, user_id, 'FAILED', failed_at, reason, 0, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz`
)

// holdingStatuses are the statuses of an order that holds its unit and
// its buyer's slot.
var holdingStatuses = []string{string(seckill.OrderCreated), string(seckill.OrderPaid)}

func toDBVoucher(v *seckill.Voucher) *voucherRow {
	return &voucherRow{
		ID:          v.ID,
		ShopID:      v.ShopID,
		Title:       v.Title,
		SubTitle:    v.SubTitle,
		Rules:       v.Rules,
		PayValue:    v.PayValue,
		ActualValue: v.ActualValue,
		Type:        string(v.Type),
	}
}

func toDBCampaign(voucherID int64, c *seckill.Campaign) *campaignRow {
	return &campaignRow{
		VoucherID:    voucherID,
		InitialStock: c.InitialStock,
		Stock:        c.Stock,
		BeginTime:    c.BeginTime,
		EndTime:      c.EndTime,
		Paused:       c.Paused,
		Challenge:    string(c.Challenge),
		PoWBits:      c.PoWBits,
		Brake:        c.Brake,
		PayWindow:    int64(c.PayWindow / time.Second),
		Shards:       c.Shards,
		RoomOpens:    int64(c.Room.OpensBefore / time.Second),
		RoomRate:     c.Room.AdmitPerSecond,
		RoomPass:     int64(c.Room.PassFor / time.Second),
	}
}

func toDomainVoucher(r *voucherRow) *seckill.Voucher {
	v := &seckill.Voucher{
		ID:          r.ID,
		ShopID:      r.ShopID,
		Title:       r.Title,
		SubTitle:    r.SubTitle,
		Rules:       r.Rules,
		PayValue:    r.PayValue,
		ActualValue: r.ActualValue,
		Type:        seckill.VoucherType(r.Type),
		CreatedAt:   r.CreatedAt.UTC(),
	}
	// A LEFT JOIN that found no campaign leaves the row empty.
	if r.Campaign != nil && r.Campaign.VoucherID != 0 {
		c := toDomainCampaign(r.Campaign)
		v.Campaign = &c
	}
	return v
}

func toDomainCampaign(r *campaignRow) seckill.Campaign {
	return seckill.Campaign{
		VoucherID:    r.VoucherID,
		InitialStock: r.InitialStock,
		Stock:        r.Stock,
		BeginTime:    r.BeginTime.UTC(),
		EndTime:      r.EndTime.UTC(),
		Paused:       r.Paused,
		CreatedAt:    r.CreatedAt.UTC(),
		Epoch:        r.Epoch,
		Challenge:    seckill.ChallengeKind(r.Challenge),
		PoWBits:      r.PoWBits,
		Brake:        r.Brake,
		PayWindow:    time.Duration(r.PayWindow) * time.Second,
		Shards:       r.Shards,
		Room: seckill.WaitingRoom{OpensBefore: time.Duration(r.RoomOpens) * time.Second,
			AdmitPerSecond: r.RoomRate, PassFor: time.Duration(r.RoomPass) * time.Second},
		RoomDrawn: drawn(r.RoomDrawn),
	}
}

// drawn is a campaign's room_drawn, -1 while it is NULL.
func drawn(n *int64) int64 {
	if n == nil {
		return -1
	}
	return *n
}

func toDBQuiz(voucherID int64, qs []seckill.QuizQuestion) []quizRow {
	rows := make([]quizRow, len(qs))
	for i, q := range qs {
		answers := make([]string, len(q.Answers))
		for j, a := range q.Answers {
			answers[j] = seckill.NormalizeAnswer(a)
		}
		choices := make([]string, len(q.Choices))
		for j, c := range q.Choices {
			choices[j] = strings.TrimSpace(c) // shown to buyers as the operator wrote them
		}
		rows[i] = quizRow{VoucherID: voucherID, Position: i, Question: strings.TrimSpace(q.Question), Answers: answers, Choices: choices}
	}
	return rows
}

func toDomainOrder(r *orderView) *seckill.Order {
	return &seckill.Order{
		ID:            r.ID,
		VoucherID:     r.VoucherID,
		UserID:        r.UserID,
		Status:        seckill.OrderStatus(r.Status),
		CreatedAt:     r.At.UTC(),
		FailureReason: r.Reason,
		Amount:        r.Amount,
		PayBy:         utc(r.PayBy),
		PaidAt:        utc(r.PaidAt),
		ClosedAt:      utc(r.ClosedAt),
	}
}

func toDBAdmission(a seckill.Admission) admissionCols {
	return admissionCols{ID: a.OrderID, UserID: a.UserID, VoucherID: a.VoucherID, AdmittedAt: a.AdmittedAt}
}

// utc returns t in UTC, and the zero time (NULL) as it is.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func toDBFailure(a seckill.Admission, reason string) failureRow {
	return failureRow{admissionCols: toDBAdmission(a), Reason: reason}
}
