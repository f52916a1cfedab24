package graph

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"seckill/graph/model"
	"seckill/internal/seckill"
)

// parseID reads a GraphQL ID argument: a positive int64 in canonical
// decimal. Anything else is an INVALID_INPUT error naming field.
func parseID(field, id string) (int64, error) { return seckill.ParseID(field, id) }

func formatID(id int64) string { return strconv.FormatInt(id, 10) }

// isNotFound reports whether err is a NOT_FOUND error, which the nullable
// single-object queries answer with null.
func isNotFound(err error) bool { return seckill.ErrorCode(err) == seckill.ENOTFOUND }

// toVoucherFilter reads the arguments of Query.vouchers. An explicit first
// of 0 or less is refused here because the domain reads 0 as "default".
func toVoucherFilter(first *int32, after *string) (seckill.VoucherFilter, error) {
	var f seckill.VoucherFilter
	if first != nil {
		if *first <= 0 {
			return f, seckill.Invalidf("first", "first must be between 1 and %d", seckill.MaxPageSize)
		}
		f.First = int(*first)
	}
	if after != nil {
		id, err := parseID("after", *after)
		if err != nil {
			return f, err
		}
		f.After = id
	}
	return f, nil
}

// toNewSeckillVoucher converts the input of addSeckillVoucher; the domain
// validates every field.
func toNewSeckillVoucher(in model.AddSeckillVoucherInput) (seckill.NewSeckillVoucher, error) {
	shopID, err := parseID("shopId", in.ShopID)
	if err != nil {
		return seckill.NewSeckillVoucher{}, err
	}
	if in.Shards != nil {
		// A given 0 is refused as powBits' is; the domain reads 0 as
		// omitted (1 shard).
		if err := seckill.CheckShards(int(*in.Shards)); err != nil {
			return seckill.NewSeckillVoucher{}, err
		}
	}
	return seckill.NewSeckillVoucher{
		ShopID:      shopID,
		Title:       in.Title,
		SubTitle:    deref(in.SubTitle),
		Rules:       deref(in.Rules),
		PayValue:    int64(in.PayValue),
		ActualValue: int64(in.ActualValue),
		Stock:       int64(in.Stock),
		BeginTime:   in.BeginTime,
		EndTime:     in.EndTime,
		Challenge:   seckill.ChallengeKind(derefEnum(in.Challenge)),
		PoWBits:     optionalInt(in.PowBits),
		Quiz:        toQuiz(in.Quiz),
		Brake:       derefInt(in.Brake),
		PayWindow:   toPayWindow(in.PayWindowSeconds),
		Shards:      derefInt(in.Shards),
		Room:        toWaitingRoom(in.WaitingRoom),
	}, nil
}

// optionalInt keeps an omitted Int omitted: the domain tells nil (its
// default) from a given 0 (refused where 0 is not allowed).
func optionalInt(p *int32) *int {
	if p == nil {
		return nil
	}
	n := int(*p)
	return &n
}

func derefInt(p *int32) int {
	if p == nil {
		return 0
	}
	return int(*p)
}

func derefEnum(k *model.ChallengeKind) string {
	if k == nil {
		return ""
	}
	return string(*k)
}

func toQuiz(in []*model.QuizQuestionInput) []seckill.QuizQuestion {
	if in == nil {
		return nil
	}
	out := make([]seckill.QuizQuestion, len(in))
	for i, q := range in {
		out[i] = seckill.QuizQuestion{Question: q.Question, Answers: q.Answers, Choices: q.Choices}
	}
	return out
}

func toChallengeAnswer(a *model.ChallengeAnswer) *seckill.ChallengeAnswer {
	if a == nil {
		return nil
	}
	return &seckill.ChallengeAnswer{Token: a.Token, Solution: a.Solution}
}

func toGraphChallenge(c *seckill.Challenge) (*model.Challenge, error) {
	kind, err := toGraphEnum[model.ChallengeKind](string(c.Kind), "challenge kind")
	if err != nil {
		return nil, err
	}
	out := &model.Challenge{Kind: kind, Token: optional(c.Token), Question: optional(c.Question), Choices: c.Choices}
	if c.Kind == seckill.ChallengePoW {
		b := int32(c.Bits)
		out.Bits = &b
	}
	if !c.ExpiresAt.IsZero() {
		t := c.ExpiresAt
		out.ExpiresAt = &t
	}
	return out, nil
}

// toGraphVoucher converts a voucher; its campaign's status is the one at now.
func toGraphVoucher(v *seckill.Voucher, now time.Time) (*model.Voucher, error) {
	typ, err := toGraphVoucherType(v.Type)
	if err != nil {
		return nil, err
	}
	out := &model.Voucher{
		ID:       formatID(v.ID),
		ShopID:   formatID(v.ShopID),
		Title:    v.Title,
		SubTitle: optional(v.SubTitle),
		Rules:    optional(v.Rules),
		Type:     typ,
	}
	if out.PayValue, err = toGraphInt("payValue", v.PayValue); err != nil {
		return nil, err
	}
	if out.ActualValue, err = toGraphInt("actualValue", v.ActualValue); err != nil {
		return nil, err
	}
	if v.Campaign != nil {
		if out.Seckill, err = toGraphCampaign(v.Campaign, now); err != nil {
			return nil, fmt.Errorf("voucher %d: %w", v.ID, err)
		}
	}
	return out, nil
}

func toGraphVouchers(vs []*seckill.Voucher, now time.Time) ([]*model.Voucher, error) {
	out := make([]*model.Voucher, 0, len(vs))
	for _, v := range vs {
		gv, err := toGraphVoucher(v, now)
		if err != nil {
			return nil, err
		}
		out = append(out, gv)
	}
	return out, nil
}

func toGraphCampaign(c *seckill.Campaign, now time.Time) (*model.SeckillCampaign, error) {
	status, err := toGraphCampaignStatus(c.StatusAt(now))
	if err != nil {
		return nil, err
	}
	challenge := c.Challenge
	if challenge == "" {
		challenge = seckill.ChallengeNone
	}
	kind, err := toGraphEnum[model.ChallengeKind](string(challenge), "challenge kind")
	if err != nil {
		return nil, err
	}
	out := &model.SeckillCampaign{BeginTime: c.BeginTime, EndTime: c.EndTime, Status: status,
		Challenge: kind, Brake: int32(c.Brake), Shards: int32(c.ShardCount()),
		PayWindowSeconds: int32(c.PayWindow / time.Second), // at most a day
		WaitingRoom:      toGraphWaitingRoom(c)}
	if c.Challenge == seckill.ChallengePoW {
		b := int32(c.PoWBits)
		out.PowBits = &b
	}
	if out.Stock, err = toGraphInt("stock", c.InitialStock); err != nil {
		return nil, err
	}
	if out.Remaining, err = toGraphInt("remaining", c.LiveRemaining()); err != nil {
		return nil, err
	}
	if out.Sold, err = toGraphInt("sold", c.Sold()); err != nil {
		return nil, err
	}
	return out, nil
}

func toGraphSeckillResult(r seckill.PurchaseResult) (*model.SeckillResult, error) {
	outcome, err := toGraphOutcome(r.Outcome)
	if err != nil {
		return nil, err
	}
	out := &model.SeckillResult{Outcome: outcome, Message: r.Outcome.Message()}
	if r.Outcome == seckill.OutcomeAccepted {
		id := formatID(r.OrderID)
		out.OrderID = &id
	}
	if r.RetryAfter > 0 {
		// Whole seconds, rounded up: a client that waits as long is not
		// refused for the last fraction. The longest wait is minutes.
		secs := int32((r.RetryAfter + time.Second - 1) / time.Second)
		out.RetryAfter = &secs
	}
	return out, nil
}

func toGraphOrder(o *seckill.Order) (*model.Order, error) {
	status, err := toGraphOrderStatus(o.Status)
	if err != nil {
		return nil, err
	}
	out := &model.Order{
		ID:            formatID(o.ID),
		VoucherID:     formatID(o.VoucherID),
		UserID:        formatID(o.UserID),
		Status:        status,
		CreatedAt:     o.CreatedAt,
		FailureReason: optional(o.FailureReason),
	}
	if err := fillGraphOrderPayment(out, o); err != nil {
		return nil, err
	}
	return out, nil
}

func toGraphOrders(os []*seckill.Order) ([]*model.Order, error) {
	out := make([]*model.Order, 0, len(os))
	for _, o := range os {
		g, err := toGraphOrder(o)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

func toGraphStatusEvent(ev seckill.StatusEvent) (*model.OrderStatusEvent, error) {
	status, err := toGraphOrderStatus(ev.Status)
	if err != nil {
		return nil, err
	}
	return &model.OrderStatusEvent{
		OrderID: formatID(ev.OrderID),
		Status:  status,
		At:      ev.At,
		Reason:  optional(ev.Reason),
	}, nil
}

// The enums below spell their values as the domain does; a value the schema
// does not know is a bug on the server, reported as an internal error.

func toGraphVoucherType(t seckill.VoucherType) (model.VoucherType, error) {
	return toGraphEnum[model.VoucherType](string(t), "voucher type")
}

func toGraphCampaignStatus(s seckill.CampaignStatus) (model.CampaignStatus, error) {
	return toGraphEnum[model.CampaignStatus](string(s), "campaign status")
}

func toGraphOutcome(o seckill.Outcome) (model.SeckillOutcome, error) {
	return toGraphEnum[model.SeckillOutcome](string(o), "outcome")
}

func toGraphOrderStatus(s seckill.OrderStatus) (model.OrderStatus, error) {
	return toGraphEnum[model.OrderStatus](string(s), "order status")
}

func toGraphEnum[E interface {
	~string
	IsValid() bool
}](s, what string) (E, error) {
	e := E(s)
	if !e.IsValid() {
		return e, fmt.Errorf("graph: %s %q is not in the schema", what, s)
	}
	return e, nil
}

// toGraphInt narrows a count or an amount to GraphQL's 32-bit Int. The
// domain's limits keep them far below; a larger one is a bug, not something
// to truncate silently.
func toGraphInt(field string, n int64) (int32, error) {
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, fmt.Errorf("graph: %s %d does not fit a GraphQL Int", field, n)
	}
	return int32(n), nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
