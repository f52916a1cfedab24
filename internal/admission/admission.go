// Package admission is the Redis adapter of the seckill domain: it decides
// purchases atomically with the Lua scripts of package lua, keeps the
// admissions that Postgres does not hold yet (the pending outbox), warms
// campaigns from Postgres, and carries order status events over pub/sub. It
// implements seckill.Admitter (Admitter) and seckill.StatusBus (Bus).
//
// Keys, with a configurable prefix <p>:
//
//	<p>seckill:{v42}:campaign      hash: stock, seq, begin_ms, end_ms, paused,
//	                               epoch, rid (the run_id of the server that
//	                               installed it), state (set while it must
//	                               not admit: "stale", "rebuilding")
//	<p>seckill:{v42}:buyers        set of user ids holding a unit
//	<p>seckill:{v42}:pending       hash: id -> "<user>:<admitted_ms>"
//	<p>seckill:{v42}:pending_at    zset: id scored by admitted_ms
//	<p>seckill:{v42}:rebuild       the rebuild lock (a token, with a TTL)
//	<p>seckill:{v42}:buyers_staged the buyers a rebuild is about to install
//	<p>seckill:{v42}:guard         hash: challenge, brake (guard.go)
//	<p>seckill:{v42}:limit:<user>  a user's shared limit (GCRA state)
//	<p>seckill:{v42}:limit:a<addr> a client address's shared limit (GCRA
//	                               state; an IPv4 address or an IPv6 /64)
//	<p>seckill:{v42}:used:<nonce>  a used challenge token, until it expires
//	<p>seckill:{v42}:wrong:<user>  hash: n, until: a user's wrong answers to the
//	                               challenge and the end of their wait; gone
//	                               an hour after the wait ends
//	<p>seckill:{v42}:brake         the brake's GCRA state
//	<p>seckill:{v42}:returned      set of ids whose unit a cancel or an
//	                               expiry gave back (ReturnUnit)
//
// (id is the low 32 bits of the order id: epoch and sequence)
//
// and the pub/sub channels <p>seckill:{global}:order_status (Bus) and
// <p>seckill:{global}:stock_returned (voucher ids whose local sold-out marks
// must go). Nothing else is global: no Redis index lists the campaigns, and
// no recovery decision reads a key outside the campaign's hash tag (the
// campaigns to guard and reconcile come from Postgres). On a Redis Cluster
// the channels are sharded (SPUBLISH, SSUBSCRIBE): a message goes to the one
// shard of the {global} tag, where every process subscribes, rather than to
// every node.
package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/clientaddr"
	"seckill/internal/seckill"
	"seckill/lua"
)

// Scripts are shared by every Admitter: a Script holds only its source and
// its SHA1.
var (
	admitScript    = newScript(lua.Admit)
	warmScript     = newScript(lua.Warm)
	releaseScript  = newScript(lua.Release)
	ackScript      = newScript(lua.Ack)
	updateScript   = newScript(lua.Update)
	addStockScript = newScript(lua.AddStock)
	beginScript    = newScript(lua.RebuildBegin)
	abortScript    = newScript(lua.RebuildAbort)
	rebuildScript  = newScript(lua.Rebuild)
	stampScript    = newScript(lua.Stamp)
	liveScript     = newScript(lua.Live)
	retireScript   = newScript(lua.Retire)
)

// allScripts lists every script newScript made, for Load.
var allScripts []*redis.Script

func newScript(src string) *redis.Script {
	s := redis.NewScript(src)
	allScripts = append(allScripts, s)
	return s
}

// DefaultSoldOutTTL is how long a process answers SOLD_OUT or ENDED for a
// campaign on its own, without asking Redis, unless told sooner that the
// campaign may admit again.
const DefaultSoldOutTTL = 500 * time.Millisecond

// windowMark bounds how long a process answers NOT_STARTED or ENDED from
// its memory of a campaign's window: changes of the window reach every
// process at once over pub/sub, and, since pub/sub may lose a message, at
// the latest after windowMark.
const windowMark = 5 * time.Second

// buyersChunk bounds the size of one SADD when warming buyers.
const buyersChunk = 5000

// maxSeq is the highest order sequence: it must fit the low 32 bits of an
// order id.
const maxSeq = 1<<32 - 1

// Options configure an Admitter.
type Options struct {
	// Prefix is put in front of every key and channel name ("" by default);
	// tests use it to isolate themselves.
	Prefix string
	// SoldOutTTL is how long a SOLD_OUT or ENDED answer from Redis is
	// repeated locally. 0 means DefaultSoldOutTTL; a negative value turns
	// the local mark off.
	SoldOutTTL time.Duration
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// LiveCampaigns lists the campaigns a ConnectHook must guard, from
	// Postgres (the source of truth). It is called only when a node turns
	// out to be a server not seen before.
	LiveCampaigns func(ctx context.Context) ([]int64, error)
	// MinReplicas is how many replicas must acknowledge an admission (WAIT)
	// before Admit answers it ACCEPTED without ErrNotReplicated; 0 sends no
	// WAIT. See durable.go.
	MinReplicas int
	// WaitTimeout bounds that WAIT; 0 means DefaultWaitTimeout.
	WaitTimeout time.Duration
	// UserRate and UserBurst are the limit every instance shares on one
	// user's attempts at one campaign, checked by the admit script itself:
	// UserRate attempts a second in bursts of UserBurst. 0 (or less): none.
	UserRate  float64
	UserBurst int
	// AddressRate and AddressBurst are the limit every instance shares on
	// the attempts at one campaign from one client address (an IPv6 /64;
	// see clientaddr.Bucket), taken from the context
	// (seckill.ClientAddrFromContext) and checked by the same script. 0 (or
	// less): none. An attempt without an address is not counted.
	AddressRate  float64
	AddressBurst int
	// WrongAnswerWait is how long a user waits after their first wrong
	// answer to a campaign's challenge before they may try that campaign
	// again; each further one doubles it, up to WrongAnswerWaitMax. 0
	// means seckill.DefaultWrongAnswerWait (and the Max
	// seckill.DefaultMaxWrongAnswerWait); a negative value: no wait.
	WrongAnswerWait    time.Duration
	WrongAnswerWaitMax time.Duration
}

// wrongKeep is how long a user's count of wrong answers outlives their
// wait: a user who stays away that long starts from the first wait again,
// and Redis keeps nothing of them for long.
const wrongKeep = time.Hour

// Admitter implements seckill.Admitter on Redis.
//
// Admit costs exactly one round trip (EVALSHA) and, once Redis answered
// SOLD_OUT or ENDED for a campaign, none at all for SoldOutTTL: the process
// repeats that answer locally. The mark is dropped at once when stock comes
// back through this process (Release, AddStock, UpdateCampaign, Warm) or
// through any other (a voucher id on the stock_returned channel, which
// Start or Run listen to); pub/sub is at most once, so the mark also expires
// after SoldOutTTL in any case. A consequence: a user who bought a unit and
// asks again after the sell-out may be told SOLD_OUT instead of
// ALREADY_PURCHASED. Both are refusals; we accept the imprecision.
type Admitter struct {
	rdb    redis.UniversalClient
	keys   keys
	logger *slog.Logger
	local  *local
	admits *pipeline // the admit script, pipelined

	userEvery int64 // microseconds between a user's attempts; 0: no limit
	userBurst int
	addrEvery int64 // microseconds between an address's attempts; 0: no limit
	addrBurst int
	wrongWait int64 // milliseconds after the first wrong answer; 0: no wait
	wrongMax  int64 // the longest wait, milliseconds

	startMu sync.Mutex
	subDone chan struct{} // closed when the stock_returned listener exits
}

var _ seckill.Admitter = (*Admitter)(nil)

// New returns an Admitter on rdb. Call Load at start, and Start (or Run) to
// hear about stock returned by other processes.
func New(rdb redis.UniversalClient, opts Options) *Admitter {
	ttl := opts.SoldOutTTL
	if ttl == 0 {
		ttl = DefaultSoldOutTTL
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	admits := newPipeline(rdb, admitScript, defaultPipelines, defaultMaxPipeline, defaultBacklog)
	if opts.MinReplicas > 0 {
		admits.dur = &durability{replicas: opts.MinReplicas, timeout: cmp.Or(opts.WaitTimeout, DefaultWaitTimeout),
			wrote: admitWrote, logger: logger, waits: make(chan struct{}, maxWaits)}
	}
	a := &Admitter{
		rdb:       rdb,
		keys:      keys{prefix: opts.Prefix},
		logger:    logger,
		local:     newLocal(ttl),
		admits:    admits,
		userBurst: max(opts.UserBurst, 1),
		addrBurst: max(opts.AddressBurst, 1),
	}
	a.userEvery = gcraInterval(opts.UserRate)
	a.addrEvery = gcraInterval(opts.AddressRate)
	if opts.WrongAnswerWait >= 0 {
		wait := cmp.Or(opts.WrongAnswerWait, seckill.DefaultWrongAnswerWait)
		a.wrongWait = max(wait.Milliseconds(), 1)
		a.wrongMax = max(cmp.Or(opts.WrongAnswerWaitMax, seckill.DefaultMaxWrongAnswerWait).Milliseconds(), a.wrongWait)
	}
	return a
}

// gcraInterval is the admit script's form of a rate: whole microseconds
// between attempts (at least 1), or 0 for no limit.
func gcraInterval(perSecond float64) int64 {
	if perSecond <= 0 {
		return 0
	}
	return max(int64(1e6/perSecond), 1)
}

// Load loads every script into Redis (SCRIPT LOAD), so that the first
// EVALSHA finds them and pipelined calls work. Scripts still fall back to
// EVAL when Redis lost them (SCRIPT FLUSH, restart).
func (a *Admitter) Load(ctx context.Context) error {
	for _, s := range allScripts {
		if err := s.Load(ctx, a.rdb).Err(); err != nil {
			return fmt.Errorf("admission: load scripts: %w", err)
		}
	}
	return nil
}

// Start subscribes to the stock_returned channel, waits until Redis
// confirmed the subscription, and listens in one goroutine until ctx ends.
// It may be called once.
func (a *Admitter) Start(ctx context.Context) error {
	a.startMu.Lock()
	defer a.startMu.Unlock()
	if a.subDone != nil {
		return errors.New("admission: listener started already")
	}
	l, err := listen(ctx, a.rdb, a.keys.stockReturned(), a.logger, func(payload string) {
		id, err := strconv.ParseInt(payload, 10, 64)
		if err != nil {
			a.logger.Warn("bad stock_returned message", "payload", payload)
			return
		}
		a.local.invalidate(id)
	})
	if err != nil {
		return fmt.Errorf("admission: subscribe stock_returned: %w", err)
	}
	a.subDone = l.done
	context.AfterFunc(ctx, l.cancel)
	return nil
}

// publish sends msg on channel: SPUBLISH on a cluster, where a plain
// PUBLISH would travel to every node; PUBLISH on a single node or Sentinel's
// master, which may be older than Redis 7.
func publish(ctx context.Context, rdb redis.UniversalClient, channel string, msg any) error {
	if sharded(rdb) {
		return rdb.SPublish(ctx, channel, msg).Err()
	}
	return rdb.Publish(ctx, channel, msg).Err()
}

// sharded reports whether rdb is a Redis Cluster client, whose channels
// are sharded.
func sharded(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// errRebuilding refuses a campaign change while the campaign is rebuilt from
// Postgres: the rebuild would overwrite it with what it read before.
var errRebuilding = seckill.Errorf(seckill.EUNAVAILABLE, "the campaign is being restored; try again")

// validVoucherID reports whether id can own order ids: OrderID shifts it by
// 32 bits into a positive int64.
func validVoucherID(id int64) bool { return id > 0 && id <= math.MaxInt32 }

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
	if !ok1 || !ok2 || seq <= 0 || seq > maxSeq {
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

// Warm installs a campaign unless Redis holds it already, and reports
// whether it did. It adds the buyers first (in chunks; adding a present one
// is harmless), then creates the campaign hash, so the campaign never admits
// before its buyers are known. EINVALID for a campaign Redis cannot hold.
func (a *Admitter) Warm(ctx context.Context, st seckill.WarmState) (bool, error) {
	c := st.Campaign
	id := c.VoucherID
	if err := a.writeBuyers(ctx, st, a.keys.buyers(id), 0); err != nil {
		return false, err
	}
	n, err := warmScript.Run(ctx, a.rdb, []string{a.keys.campaign(id)}, campaignArgs(c)...).Int64()
	if err != nil {
		return false, redisError("warm", err, nil)
	}
	if n == 1 {
		a.local.invalidate(id)
	}
	return n == 1, nil
}

// writeBuyers checks st, then writes, in one round trip, the campaign's
// guard settings and its buyers added to key (in chunks: there may be
// many). A staging key (ttl > 0) is emptied first and expires after ttl,
// so one left by a process that died goes away.
func (a *Admitter) writeBuyers(ctx context.Context, st seckill.WarmState, key string, ttl time.Duration) error {
	if err := validWarmState(st); err != nil {
		return err
	}
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if ttl > 0 {
			p.Del(ctx, key)
		}
		for chunk := range slices.Chunk(st.Buyers, buyersChunk) {
			members := make([]any, len(chunk))
			for i, u := range chunk {
				members[i] = u
			}
			p.SAdd(ctx, key, members...)
		}
		if ttl > 0 {
			p.Expire(ctx, key, ttl)
		}
		a.setGuard(ctx, p, st.Campaign)
		return nil
	})
	return redisError("write buyers", err, nil)
}

// validWarmState checks a state before Warm or FinishRebuild writes any of
// it: EINVALID for a campaign Redis cannot hold.
func validWarmState(st seckill.WarmState) error {
	c := st.Campaign
	switch {
	case !validVoucherID(c.VoucherID):
		return seckill.Invalidf("voucherId", "voucher id %d out of range", c.VoucherID)
	case c.Stock < 0:
		return seckill.Invalidf("stock", "stock must be 0 or more")
	case c.Epoch < 0 || c.Epoch > seckill.MaxEpoch:
		return seckill.Invalidf("epoch", "epoch %d out of range", c.Epoch)
	}
	if err := validWindow(c.BeginTime, c.EndTime); err != nil {
		return err
	}
	for _, u := range st.Buyers {
		if u <= 0 {
			return seckill.Invalidf("buyers", "buyer id %d is not positive", u)
		}
	}
	return nil
}

// validWindow checks a sale window before a script is given it: EINVALID
// for one that does not begin or that ends before it begins.
func validWindow(begin, end time.Time) error {
	if begin.UnixMilli() < 0 {
		return seckill.Invalidf("beginTime", "beginTime is required")
	}
	if end.UnixMilli() <= begin.UnixMilli() {
		return seckill.Invalidf("endTime", "endTime must be after beginTime")
	}
	return nil
}

// windowArgs and campaignArgs are a sale window and a campaign as the
// scripts take them in ARGV, in the order lua/prelude.lua's window and
// campaign read them.
func windowArgs(begin, end time.Time, paused bool) []any {
	return []any{begin.UnixMilli(), end.UnixMilli(), boolArg(paused)}
}

func campaignArgs(c seckill.Campaign) []any {
	return append([]any{c.Stock, c.Epoch}, windowArgs(c.BeginTime, c.EndTime, c.Paused)...)
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
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

// Queued returns how many admissions of each campaign are pending (admitted
// in Redis, not yet held by Postgres), in one round trip. Every id is in the
// map; a campaign Redis does not hold counts 0.
func (a *Admitter) Queued(ctx context.Context, voucherIDs []int64) (map[int64]int64, error) {
	out := make(map[int64]int64, len(voucherIDs))
	if len(voucherIDs) == 0 {
		return out, nil
	}
	cmds := make([]*redis.IntCmd, len(voucherIDs))
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range voucherIDs {
			cmds[i] = p.HLen(ctx, a.keys.pending(id))
		}
		return nil
	})
	if err != nil {
		return nil, redisError("queued", err, nil)
	}
	for i, cmd := range cmds {
		out[voucherIDs[i]] = cmd.Val()
	}
	return out, nil
}

// Pending returns an admission that Postgres does not hold yet. ENOTFOUND
// when it is not pending (never admitted, acknowledged or released).
func (a *Admitter) Pending(ctx context.Context, orderID int64) (*seckill.Admission, error) {
	voucherID, seq := seckill.SplitOrderID(orderID)
	if orderID <= 0 || !validVoucherID(voucherID) || seq == 0 {
		return nil, seckill.Errorf(seckill.ENOTFOUND, "order %d not found", orderID)
	}
	v, err := a.rdb.HGet(ctx, a.keys.pending(voucherID), strconv.FormatInt(seq, 10)).Result()
	if err != nil {
		return nil, redisError("pending", err, seckill.Errorf(seckill.ENOTFOUND, "order %d not found", orderID))
	}
	return parsePending(voucherID, seq, v)
}

// parsePending decodes a pending hash value "<user>:<admitted_ms>".
func parsePending(voucherID, seq int64, v string) (*seckill.Admission, error) {
	u, ms, ok := strings.Cut(v, ":")
	userID, err1 := strconv.ParseInt(u, 10, 64)
	admitted, err2 := strconv.ParseInt(ms, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("admission: pending %d/%d: malformed value %q", voucherID, seq, v)
	}
	return &seckill.Admission{
		OrderID:    seckill.OrderID(voucherID, seq),
		VoucherID:  voucherID,
		UserID:     userID,
		AdmittedAt: time.UnixMilli(admitted).UTC(),
	}, nil
}

// Ack forgets admissions that Postgres holds now: one script call per
// campaign, all in one pipeline. It is idempotent. The campaign of each
// admission is read from its order id.
func (a *Admitter) Ack(ctx context.Context, adms []seckill.Admission) error {
	if len(adms) == 0 {
		return nil
	}
	seqs := make(map[int64][]any)
	var order []int64
	for _, adm := range adms {
		voucherID, seq := seckill.SplitOrderID(adm.OrderID)
		if adm.OrderID <= 0 || !validVoucherID(voucherID) || seq == 0 {
			return seckill.Invalidf("orderId", "order id %d is malformed", adm.OrderID)
		}
		if _, ok := seqs[voucherID]; !ok {
			order = append(order, voucherID)
		}
		seqs[voucherID] = append(seqs[voucherID], seq)
	}
	calls := make([]scriptCall, len(order))
	for i, id := range order {
		calls[i] = scriptCall{keys: []string{a.keys.pending(id), a.keys.pendingAt(id)}, args: seqs[id]}
	}
	if err := a.runPipelined(ctx, ackScript, calls); err != nil {
		return redisError("ack", err, nil)
	}
	return nil
}

type scriptCall struct {
	keys []string
	args []any
}

// runPipelined runs script once per call in one pipeline. A pipeline sends
// only EVALSHA; when Redis lost the script (NOSCRIPT), the calls that failed
// are retried one by one with Run, which falls back to EVAL. Callers'
// scripts must be idempotent.
func (a *Admitter) runPipelined(ctx context.Context, script *redis.Script, calls []scriptCall) error {
	cmds := make([]*redis.Cmd, len(calls))
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = script.EvalSha(ctx, p, c.keys, c.args...)
		}
		return nil
	})
	if err == nil {
		return nil
	}
	for i, cmd := range cmds {
		err := cmd.Err()
		if err == nil {
			continue
		}
		if !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return err
		}
		if err := script.Run(ctx, a.rdb, calls[i].keys, calls[i].args...).Err(); err != nil {
			return err
		}
	}
	return nil
}

// Release gives a failed admission's unit back (and its buyer slot unless
// keepBuyer is set), and tells every process that the campaign may admit
// again. It reports false when
// the admission was not pending (released or acknowledged before), so
// concurrent or repeated calls give back exactly one unit. ECONFLICT when
// the order is pending for another user than adm.UserID.
func (a *Admitter) Release(ctx context.Context, adm seckill.Admission, keepBuyer bool) (bool, error) {
	voucherID, seq := seckill.SplitOrderID(adm.OrderID)
	if adm.OrderID <= 0 || !validVoucherID(voucherID) || seq == 0 {
		return false, seckill.Invalidf("orderId", "order id %d is malformed", adm.OrderID)
	}
	if adm.UserID <= 0 {
		return false, seckill.Invalidf("userId", "user id must be positive")
	}
	keep := 0
	if keepBuyer {
		keep = 1
	}
	n, err := releaseScript.Run(ctx, a.rdb, a.keys.admit(voucherID), seq, adm.UserID, keep).Int64()
	if err != nil {
		return false, redisError("release", err, nil)
	}
	switch n {
	case 1:
		a.stockReturned(ctx, voucherID)
		return true, nil
	case 0:
		return false, nil
	case -1:
		return false, seckill.Errorf(seckill.ECONFLICT, "order %d is pending for another user", adm.OrderID)
	}
	return false, fmt.Errorf("admission: release order %d: unexpected script reply %d", adm.OrderID, n)
}

// stockReturned drops this process's mark for the campaign and tells the
// others. A lost message only delays them by SoldOutTTL, so a failure to
// publish is logged, not returned.
func (a *Admitter) stockReturned(ctx context.Context, voucherID int64) {
	a.local.invalidate(voucherID)
	if err := publish(context.WithoutCancel(ctx), a.rdb, a.keys.stockReturned(), voucherID); err != nil {
		a.logger.WarnContext(ctx, "publish stock_returned; other processes catch up after the sold-out TTL",
			"voucher_id", voucherID, "err", err)
	}
}

// Stale returns up to limit admissions of the campaigns voucherIDs pending
// for longer than age, oldest first, measured on Redis's clock. The caller
// names the campaigns (from Postgres): no Redis index decides which are
// looked at.
func (a *Admitter) Stale(ctx context.Context, voucherIDs []int64, age time.Duration, limit int) ([]seckill.Admission, error) {
	ids := slices.DeleteFunc(slices.Clone(voucherIDs), func(id int64) bool { return !validVoucherID(id) })
	if limit <= 0 || len(ids) == 0 {
		return nil, nil
	}
	now, err := a.rdb.Time(ctx).Result()
	if err != nil {
		return nil, redisError("stale: time", err, nil)
	}
	cutoff := "(" + strconv.FormatInt(now.Add(-age).UnixMilli(), 10)

	// The oldest `limit` of each campaign, then the oldest `limit` of all.
	ranges := make([]*redis.ZSliceCmd, len(ids))
	_, err = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			ranges[i] = p.ZRangeByScoreWithScores(ctx, a.keys.pendingAt(id),
				&redis.ZRangeBy{Min: "-inf", Max: cutoff, Count: int64(limit)})
		}
		return nil
	})
	if err != nil {
		return nil, redisError("stale: pending_at", err, nil)
	}
	type candidate struct {
		voucherID, seq int64
		ms             float64
	}
	var cands []candidate
	for i, cmd := range ranges {
		for _, z := range cmd.Val() {
			member, _ := z.Member.(string)
			seq, err := strconv.ParseInt(member, 10, 64)
			if err != nil {
				a.logger.WarnContext(ctx, "bad member of pending_at", "voucher_id", ids[i], "member", z.Member)
				continue
			}
			cands = append(cands, candidate{voucherID: ids[i], seq: seq, ms: z.Score})
		}
	}
	slices.SortFunc(cands, func(x, y candidate) int {
		return cmp.Or(cmp.Compare(x.ms, y.ms), cmp.Compare(x.voucherID, y.voucherID), cmp.Compare(x.seq, y.seq))
	})
	cands = cands[:min(len(cands), limit)]
	if len(cands) == 0 {
		return nil, nil
	}

	// The users, from the pending hash; an entry acknowledged meanwhile is
	// no longer stale.
	values := make([]*redis.SliceCmd, len(cands))
	_, err = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range cands {
			values[i] = p.HMGet(ctx, a.keys.pending(c.voucherID), strconv.FormatInt(c.seq, 10))
		}
		return nil
	})
	if err != nil {
		return nil, redisError("stale: pending", err, nil)
	}
	out := make([]seckill.Admission, 0, len(cands))
	for i, c := range cands {
		v, ok := values[i].Val()[0].(string)
		if !ok {
			continue
		}
		adm, err := parsePending(c.voucherID, c.seq, v)
		if err != nil {
			a.logger.WarnContext(ctx, "skip malformed pending admission", "voucher_id", c.voucherID, "err", err)
			continue
		}
		out = append(out, *adm)
	}
	return out, nil
}

// UpdateCampaign changes the window and the pause of a campaign Redis holds,
// and tells every process that it may admit again. ENOTFOUND when Redis
// does not hold it; EINVALID for a window that ends before it begins.
func (a *Admitter) UpdateCampaign(ctx context.Context, voucherID int64, begin, end time.Time, paused bool) error {
	if !validVoucherID(voucherID) {
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	if err := validWindow(begin, end); err != nil {
		return err
	}
	n, err := updateScript.Run(ctx, a.rdb, []string{a.keys.campaign(voucherID)}, windowArgs(begin, end, paused)...).Int64()
	if err != nil {
		return redisError("update campaign", err, nil)
	}
	switch n {
	case 0:
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	case -1:
		return errRebuilding
	}
	a.stockReturned(ctx, voucherID)
	return nil
}

// AddStock puts n more units of a campaign Redis holds on sale and tells
// every process. ENOTFOUND when Redis does not hold it; EINVALID unless
// 1 <= n <= 10^12.
func (a *Admitter) AddStock(ctx context.Context, voucherID, n int64) error {
	if !validVoucherID(voucherID) {
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	}
	if n <= 0 || n > 1e12 {
		return seckill.Invalidf("stock", "stock to add must be between 1 and 10^12")
	}
	stock, err := addStockScript.Run(ctx, a.rdb, []string{a.keys.campaign(voucherID)}, n).Int64()
	if err != nil {
		return redisError("add stock", err, nil)
	}
	switch {
	case stock == 0:
		return seckill.Errorf(seckill.ENOTFOUND, "voucher %d not found", voucherID)
	case stock < 0:
		return errRebuilding
	}
	a.stockReturned(ctx, voucherID)
	return nil
}

// Retire trims each campaign of ids that ended more than after ago, has no
// pending admission and is not being rebuilt, down to its hash and guard:
// its buyers and returned orders (one member per buyer) leave Redis, which
// otherwise keeps every campaign it ever sold. Purchases of it still hear
// ENDED from Redis. It returns how many it trimmed now; a campaign trimmed
// before is left as it is.
func (a *Admitter) Retire(ctx context.Context, ids []int64, after time.Duration) (int, error) {
	ids = slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return !validVoucherID(id) })
	if len(ids) == 0 {
		return 0, nil
	}
	cmds := make([]*redis.Cmd, len(ids))
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = retireScript.Eval(ctx, p, []string{a.keys.campaign(id), a.keys.buyers(id), a.keys.pending(id),
				a.keys.returned(id)}, after.Milliseconds())
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, redisError("retire", err, nil)
	}
	n := 0
	for _, c := range cmds {
		if v, err := c.Int64(); err == nil && v == 1 {
			n++
		}
	}
	return n, nil
}

// Forget deletes a campaign from Redis: its hash, buyers and pending
// admissions. Pending admissions are
// lost with it; tests and operators use it for campaigns that are over.
func (a *Admitter) Forget(ctx context.Context, voucherID int64) error {
	if !validVoucherID(voucherID) {
		return nil
	}
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, append(a.keys.admit(voucherID), a.keys.returned(voucherID))...)
		p.Del(ctx, a.keys.guard(voucherID), a.keys.brake(voucherID))
		return nil
	})
	a.local.forget(voucherID)
	return redisError("forget", err, nil)
}
