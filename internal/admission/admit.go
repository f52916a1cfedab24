package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/clientaddr"
	"seckill/internal/seckill"
	"seckill/lua"
)

// The hot path of a purchase: Admit decides it in one script call, sent
// through the admit pipeline (pipeline.go), or answers from this process's
// memory of the campaign (local.go); Remaining and Pending read what it
// wrote.

var admitScript = newScript(lua.Admit)

// windowMark bounds how long a process answers NOT_STARTED or ENDED from
// its memory of a campaign's window: changes of the window reach every
// process at once over pub/sub, and, since pub/sub may lose a message, at
// the latest after windowMark.
const windowMark = 5 * time.Second

// wrongKeep is how long a user's count of wrong answers outlives their
// wait: a user who stays away that long starts from the first wait again,
// and Redis keeps nothing of them for long.
const wrongKeep = time.Hour

// Admit decides one purchase: one EVALSHA, or nothing at all while the
// campaign is marked sold out (or ended) locally. The same script takes the
// attempt from the user's and the client address's shared limits, checks the ticket against the
// campaign's challenge (using its token once) and applies the brake.
// ENOTFOUND when Redis does not know the campaign; EINVALID for a user id
// that is not positive.
func (a *Admitter) Admit(ctx context.Context, voucherID, userID int64, t seckill.Ticket) (seckill.Outcome, seckill.Admission, error) {
	if !validVoucherID(voucherID) {
		return "", seckill.Admission{}, seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	if userID <= 0 {
		return "", seckill.Admission{}, seckill.Invalidf("userId", "user id must be positive")
	}
	var (
		gen   uint64
		keys  []string
		state = a.local.get(voucherID)
	)
	if state != nil {
		gen = state.gen.Load()
		if outcome, ok := a.local.marked(state, gen); ok {
			return outcome, seckill.Admission{FromMemory: true}, nil
		}
		keys = state.admitKeys
	} else {
		keys = a.keys.admit(voucherID)
	}

	// A ticket with a nonce spends its token, right or wrong (verdict "0"
	// when wrong); one refused without a nonce spends nothing.
	ticket, exp, verdict := "", int64(0), "1"
	switch {
	case t.Nonce != "" && (t.Kind == seckill.ChallengeQuiz || t.Kind == seckill.ChallengePoW):
		ticket, exp = string(t.Kind), t.ExpiresAt.UnixMilli()
		if t.Refusal != "" {
			verdict = "0"
		}
	case t.Refusal != "":
		ticket = "REFUSED"
	}
	addr, addrEvery := clientaddr.Bucket(seckill.ClientAddrFromContext(ctx)), a.addrEvery
	if addr == "" {
		addrEvery = 0
	}
	all := make([]string, 0, len(keys)+6)
	all = append(all, keys...)
	all = append(all, a.keys.guard(voucherID), a.keys.userLimit(voucherID, userID),
		a.keys.used(voucherID, t.Nonce), a.keys.brake(voucherID), a.keys.addressLimit(voucherID, addr),
		a.keys.wrong(voucherID, userID))
	sent := time.Now()
	reply := a.admits.run(ctx, all, userID, a.userEvery, a.userBurst, ticket, exp, addrEvery, a.addrBurst, verdict,
		a.wrongWait, a.wrongMax, wrongKeep.Milliseconds())
	res, err := reply.res, reply.err
	if err != nil {
		return "", seckill.Admission{}, redisError("admit", err, nil)
	}
	code, ok := int64At(res, 0)
	if !ok {
		return "", seckill.Admission{}, fmt.Errorf("admission: admit voucher %d: reply %v", voucherID, res)
	}
	outcome, err := toOutcome(voucherID, code)
	if err != nil {
		return "", seckill.Admission{}, err
	}
	if state == nil {
		state = a.local.getOrCreate(voucherID, keys)
	}
	switch outcome {
	case seckill.OutcomeSoldOut:
		a.local.remember(state, gen, outcome)
		return outcome, seckill.Admission{}, nil
	case seckill.OutcomeEnded:
		a.local.rememberFor(state, gen, outcome, max(a.local.ttl, windowMark))
		return outcome, seckill.Admission{}, nil
	case seckill.OutcomeNotStarted:
		// The window from memory: until the sale opens (by Redis's clock,
		// less the reply's way back), this process answers NOT_STARTED
		// itself, so the refresh storm before an opening costs Redis
		// nothing. A change of the window drops the mark at once.
		if wait, ok := int64At(res, 1); ok {
			a.local.rememberFor(state, gen, outcome, min(time.Duration(wait)*time.Millisecond-time.Since(sent), windowMark))
		}
		return outcome, seckill.Admission{}, nil
	case seckill.OutcomeChallengeWrong, seckill.OutcomeRateLimited:
		// A wait after a wrong answer: the one it started, or what is left.
		var adm seckill.Admission
		if wait, ok := int64At(res, 1); ok && wait > 0 {
			adm.RetryAfter = time.Duration(wait) * time.Millisecond
		}
		if outcome == seckill.OutcomeChallengeWrong && t.Refusal != "" {
			return t.Refusal, adm, nil // expired, not yours or wrong
		}
		return outcome, adm, nil
	case seckill.OutcomeAccepted:
	default:
		return outcome, seckill.Admission{}, nil
	}
	seq, ok1 := int64At(res, 1)
	ms, ok2 := int64At(res, 2)
	if !ok1 || !ok2 || !validSeq(seq) {
		return "", seckill.Admission{}, fmt.Errorf("admission: admit voucher %d: reply %v", voucherID, res)
	}
	adm := seckill.Admission{
		OrderID:    seckill.OrderID(voucherID, seq),
		VoucherID:  voucherID,
		UserID:     userID,
		AdmittedAt: time.UnixMilli(ms).UTC(),
	}
	if reply.unconfirmed {
		return outcome, adm, seckill.ErrNotReplicated
	}
	return outcome, adm, nil
}

// int64At returns the i-th element of a script's array reply as an integer.
func int64At(res []any, i int) (int64, bool) {
	if i >= len(res) {
		return 0, false
	}
	n, ok := res[i].(int64)
	return n, ok
}

// Remaining returns the live stock of the campaigns Redis holds, in one
// round trip; ids Redis does not hold are absent from the map.
func (a *Admitter) Remaining(ctx context.Context, voucherIDs []int64) (map[int64]int64, error) {
	out := make(map[int64]int64, len(voucherIDs))
	ids := slices.DeleteFunc(slices.Clone(voucherIDs), func(id int64) bool { return !validVoucherID(id) })
	if len(ids) == 0 {
		return out, nil
	}
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, a.keys.campaign(id), "stock")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, redisError("remaining", err, nil)
	}
	for i, cmd := range cmds {
		n, err := cmd.Int64()
		if errors.Is(err, redis.Nil) {
			continue
		} else if err != nil {
			return nil, redisError("remaining", err, nil)
		}
		out[ids[i]] = n
	}
	return out, nil
}

// Pending returns an admission that Postgres does not hold yet. ENOTFOUND
// when it is not pending (never admitted, acknowledged or released).
func (a *Admitter) Pending(ctx context.Context, orderID int64) (*seckill.Admission, error) {
	voucherID, seq, ok := splitOrderID(orderID)
	if !ok {
		return nil, seckill.Errorf(seckill.ENOTFOUND, "order %d not found", orderID)
	}
	v, err := a.rdb.HGet(ctx, a.keys.pending(voucherID), strconv.FormatInt(seq, 10)).Result()
	if err != nil {
		return nil, redisError("pending", err, seckill.Errorf(seckill.ENOTFOUND, "order %d not found", orderID))
	}
	return parsePending(voucherID, seq, v)
}
