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
	if !validVoucherID(voucherID) || userID <= 0 {
		return "", seckill.Admission{}, badPurchase(voucherID, userID)
	}
	state := a.local.get(voucherID)
	var gen uint64
	if state != nil {
		gen = state.gen.Load()
		if outcome, ok := a.local.marked(state, gen); ok {
			return outcome, seckill.Admission{FromMemory: true}, nil
		}
	}
	// This frame, and the ones above it, are on the stack while the call
	// waits for its pipeline: what it takes to build the call and to read
	// the reply lives in frames of their own (admitRun).
	var r admitRun
	a.prepare(ctx, &r, state, voucherID, userID, &t)
	r.sent = time.Now()
	if r.argv != nil {
		r.reply = a.admits.runArgv(ctx, r.keys, r.argv)
	} else {
		r.reply = a.admits.run(ctx, r.all, r.args...)
	}
	return a.decide(ctx, &r, state, gen, voucherID, userID, &t)
}

// admitRun is one purchase's script call in Admit: how it was sent and
// what came back.
type admitRun struct {
	keys   []string
	call   *admitStatics
	shards int
	shard  int
	probe  bool
	all    []string // the keys of a call to a shard of a campaign of several
	args   []any
	argv   []any // shard 0 of a campaign of one: the whole call, built at once
	sent   time.Time
	reply  pipeReply
}

// badPurchase is Admit's error for a voucher or user id that cannot be.
func badPurchase(voucherID, userID int64) error {
	if !validVoucherID(voucherID) {
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	return seckill.Invalidf("userId", "user id must be positive")
}

// badReply is Admit's error for a reply the script does not give.
//
//go:noinline
func badReply(voucherID int64, res []any) error {
	return fmt.Errorf("admission: admit voucher %d: reply %v", voucherID, res)
}

// prepare builds r's script call for the purchase.
func (a *Admitter) prepare(ctx context.Context, r *admitRun, state *campaignState, voucherID, userID int64, t *seckill.Ticket) {
	r.shards = 1
	switch {
	case state != nil:
		r.keys, r.call, r.shards = state.admitKeys, state.call, state.shards
	default:
		if n, ok := a.shardN.Load(voucherID); ok {
			r.keys, r.shards = a.keys.admit(voucherID), n.(int)
		} else {
			// The first purchase of a campaign in this process goes to
			// shard 0, whose script answers it as before when the
			// campaign has one shard, and otherwise says how many
			// (codeSharded), doing nothing: then the purchase goes to
			// the buyer's shard.
			r.keys, r.probe = a.keys.admit(voucherID), true
		}
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
	addr, addrEvery, addrBurst := clientaddr.Bucket(seckill.ClientAddrFromContext(ctx)), a.addrEvery, a.addrBurst
	if addr == "" {
		addrEvery = 0
	}
	if r.shards == 1 {
		if r.call == nil {
			r.call = a.keys.admitStatics(voucherID)
		}
		r.argv = a.admitArgv(r.call, userID, t.Nonce, addr, ticket, exp, addrEvery, verdict)
	} else {
		// The buyer's shard decides: one-per-user, the user's limit, the
		// challenge's token and wrong answers are the user's, so they
		// live in that shard alone. An address's buyers spread over the
		// shards, so each shard holds its share of the address's limit.
		r.shard = seckill.ShardOf(userID, r.shards)
		r.all = shardAdmitKeys(a.keys.shardBase(voucherID, r.shard, r.shards), userID, t.Nonce, addr)
		addrEvery, addrBurst = splitLimit(addrEvery, addrBurst, r.shards)
		r.args = []any{userID, a.userEvery, a.userBurst, ticket, exp, addrEvery, addrBurst, verdict,
			a.wrongWait, a.wrongMax, wrongKeep.Milliseconds()}
	}
	// The optional arguments only when they say something: a purchase
	// without a pass sends what it always sent.
	var opt []any
	switch {
	case t.Pass != "":
		opt = []any{boolArg(r.probe), string(t.Pass)}
	case r.probe:
		opt = []any{"1"}
	}
	if r.argv != nil {
		r.argv = append(r.argv, opt...)
	} else {
		r.args = append(r.args, opt...)
	}
}

// decide turns r's reply into the purchase's outcome, and remembers what
// the campaign's later purchases can be answered from memory.
func (a *Admitter) decide(ctx context.Context, r *admitRun, state *campaignState, gen uint64, voucherID, userID int64, t *seckill.Ticket) (seckill.Outcome, seckill.Admission, error) {
	reply, res, err := r.reply, r.reply.res, r.reply.err
	if err != nil {
		return "", seckill.Admission{}, redisError("admit", err, nil)
	}
	code, ok := int64At(res, 0)
	if !ok {
		return "", seckill.Admission{}, badReply(voucherID, res)
	}
	if code == codeSharded {
		n, ok := int64At(res, 1)
		if !ok || n < 2 || n > seckill.MaxShards {
			return "", seckill.Admission{}, badReply(voucherID, res)
		}
		a.shardN.Store(voucherID, int(n))
		return a.Admit(ctx, voucherID, userID, *t)
	}
	shards := r.shards
	if r.probe {
		if code != codeUnknown && code != codeRebuild {
			a.shardN.Store(voucherID, 1) // shard 0 held it and did not say otherwise
		}
		shards = 1
	}
	if code == codeSoldOut && shards > 1 {
		// The buyer's shard has nothing left; the campaign may still have
		// units elsewhere (shards.go): bring some here and ask again, or
		// say TRY_AGAIN while they are on their way. SOLD_OUT only when no
		// shard has any.
		again, retried, soldOut, err := a.restock(ctx, voucherID, shards, r.shard, r.all, r.args)
		if err != nil {
			return "", seckill.Admission{}, err
		}
		if retried {
			reply, res = again, again.res
			if again.err != nil {
				return "", seckill.Admission{}, redisError("admit", again.err, nil)
			}
			if code, ok = int64At(res, 0); !ok {
				return "", seckill.Admission{}, badReply(voucherID, res)
			}
		}
		if code == codeSoldOut && !soldOut {
			return seckill.OutcomeTryAgain, seckill.Admission{RetryAfter: tryAgainAfter}, nil
		}
	}
	outcome, err := toOutcome(voucherID, code)
	if err != nil {
		return "", seckill.Admission{}, err
	}
	if state == nil {
		state = a.local.getOrCreate(voucherID, r.keys, r.call, shards)
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
			a.local.rememberFor(state, gen, outcome, min(time.Duration(wait)*time.Millisecond-time.Since(r.sent), windowMark))
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
		return "", seckill.Admission{}, badReply(voucherID, res)
	}
	adm := seckill.Admission{
		OrderID:    seckill.ShardOrderID(voucherID, r.shard, seq),
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

// Remaining returns the live stock of the campaigns Redis holds (the sum
// over a campaign's shards), in one round trip (two the first time this
// process sees a campaign); ids Redis does not hold are absent from the map.
func (a *Admitter) Remaining(ctx context.Context, voucherIDs []int64) (map[int64]int64, error) {
	out := make(map[int64]int64, len(voucherIDs))
	ids := slices.DeleteFunc(slices.Clone(voucherIDs), func(id int64) bool { return !validVoucherID(id) })
	if len(ids) == 0 {
		return out, nil
	}
	refs, err := a.allShards(ctx, ids)
	if err != nil {
		return nil, err
	}
	cmds := make([]*redis.StringCmd, len(refs))
	_, err = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range refs {
			cmds[i] = p.HGet(ctx, r.base+"campaign", "stock")
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
		if _, ok := out[refs[i].voucherID]; ok || refs[i].shard == 0 {
			out[refs[i].voucherID] += n
		} else {
			out[refs[i].voucherID] = n // shard 0 lost: the others still count
		}
	}
	return out, nil
}

// Pending returns an admission that Postgres does not hold yet. ENOTFOUND
// when it is not pending (never admitted, acknowledged or released).
func (a *Admitter) Pending(ctx context.Context, orderID int64) (*seckill.Admission, error) {
	notFound := seckill.Errorf(seckill.ENOTFOUND, "order %d not found", orderID)
	voucherID, shard, seq, base, err := a.orderBase(ctx, orderID)
	if errors.Is(err, errMalformedID) {
		return nil, notFound
	} else if err != nil {
		return nil, err
	}
	v, err := a.rdb.HGet(ctx, base+"pending", strconv.FormatInt(seq, 10)).Result()
	if err != nil {
		return nil, redisError("pending", err, notFound)
	}
	return parsePending(voucherID, shard, seq, v)
}

// admitSHA is the admit script's SHA1, boxed once for every call's argv.
var admitSHA any = admitScript.Hash()

// admitKeyCount is the number of KEYS of the admit script.
const admitKeyCount = 10

// admitStatics is what every admit call to shard 0 of one campaign sends
// alike, boxed once per process and campaign: a purchase then allocates
// only for what is its own (its user's and address's keys, its user id).
type admitStatics struct {
	head  []any  // "evalsha", the SHA1, the number of keys, KEYS[1..5]
	used  any    // KEYS[7] without a nonce
	brake any    // KEYS[8]
	base  string // the prefix of the campaign's keys: "<p>seckill:{v42}:"
}

func (k keys) admitStatics(voucherID int64) *admitStatics {
	return &admitStatics{
		head: []any{"evalsha", admitSHA, admitKeyCount, k.campaign(voucherID), k.buyers(voucherID),
			k.pending(voucherID), k.pendingAt(voucherID), k.guard(voucherID)},
		used:  k.used(voucherID, ""),
		brake: k.brake(voucherID),
		base:  k.tagged(voucherID, ""),
	}
}

// admitFixed is the Admitter's own arguments of every admit call, boxed
// once.
type admitFixed struct {
	userEvery, userBurst, addrEvery, addrBurst, wrongWait, wrongMax, wrongKeep any
}

func (a *Admitter) fixArgs() {
	a.fixed = admitFixed{
		userEvery: a.userEvery, userBurst: a.userBurst, addrEvery: a.addrEvery, addrBurst: a.addrBurst,
		wrongWait: a.wrongWait, wrongMax: a.wrongMax, wrongKeep: wrongKeep.Milliseconds(),
	}
}

// admitArgv returns the whole EVALSHA of one purchase at shard 0 of a
// campaign of one shard: what a.keys and EvalSha would make of the same
// keys and arguments, in one slice, the user's three keys in one string.
// addrEvery is a.addrEvery or 0 (no address).
func (a *Admitter) admitArgv(c *admitStatics, userID int64, nonce, addr, ticket string, exp, addrEvery int64, verdict string) []any {
	var buf [20]byte
	u := strconv.AppendInt(buf[:0], userID, 10)
	keys := c.base + "limit:" + string(u) + c.base + "wrong:" + string(u) + c.base + "limit:a" + addr
	n1 := len(c.base) + len("limit:") + len(u)
	n2 := n1 + len(c.base) + len("wrong:") + len(u)
	used := c.used
	if nonce != "" {
		used = c.base + "used:" + nonce
	}
	f := &a.fixed
	every := f.addrEvery
	if addrEvery == 0 {
		every = int64(0)
	}
	argv := make([]any, 0, len(c.head)+5+11+2)
	argv = append(argv, c.head...)
	argv = append(argv, keys[:n1], used, c.brake, keys[n2:], keys[n1:n2],
		userID, f.userEvery, f.userBurst, ticket, exp, every, f.addrBurst, verdict,
		f.wrongWait, f.wrongMax, f.wrongKeep)
	return argv
}
