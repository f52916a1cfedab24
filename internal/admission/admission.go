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
//	<p>seckill:{v42}:guard         hash: challenge, brake (campaigns.go)
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
// A campaign of N > 1 stock shards (shards.go) has N sets of those keys,
// one per shard, under the tags {v42} (shard 0: the keys above, whose
// campaign hash also holds shards: N) and {v42.<k>.<s>} for shard k (the
// suffix s puts shard k's slot k N-ths of the slot space after shard 0's:
// keys.go shardTag). Each shard's campaign hash holds its own stock, seq
// and moved (moves out of it so far), and beside it:
//
//	<p>seckill:{<tag>}:moves       hash: move id -> "<to>:<n>:<epoch>:<ms>",
//	                               units on their way out of the shard
//	<p>seckill:{<tag>}:moved_in    set of the move ids applied to the shard
//
// A buyer's keys (limit, wrong, used) live in the buyer's shard; the brake
// and each address's limit are split into one share a shard. The rebuild
// lock stays in shard 0 and covers the campaign's shards.
//
// and the pub/sub channels <p>seckill:{global}:order_status (Bus) and
// <p>seckill:{global}:stock_returned (voucher ids whose local sold-out marks
// must go), each with ":db<N>" after it on a database N other than 0
// (channelOf: Redis's pub/sub ignores databases). Nothing else is global:
// no Redis index lists the campaigns, and no recovery decision reads a key
// outside the campaign's hash tag (the campaigns to guard and reconcile come
// from Postgres). On a Redis Cluster
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
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/batch"
	"seckill/internal/seckill"
)

// DefaultSoldOutTTL is how long a process answers SOLD_OUT or ENDED for a
// campaign on its own, without asking Redis, unless told sooner that the
// campaign may admit again.
const DefaultSoldOutTTL = 500 * time.Millisecond

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
	// CampaignShards returns the number of stock shards of those of ids
	// that have more than one, from Postgres: what the ConnectHook stops
	// and what an Admitter reads when Redis lost a campaign's shard 0
	// (whose hash says it otherwise). nil: every campaign Redis does not
	// hold has one shard.
	CampaignShards func(ctx context.Context, ids []int64) (map[int64]int, error)
}

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
	fixed     admitFixed

	startMu sync.Mutex
	subDone chan struct{} // closed when the stock_returned listener exits
	// stockChannel is the stock_returned channel of rdb's database.
	stockChannel string

	shardN         sync.Map      // voucher id -> its number of stock shards (shards.go)
	staleAt        sync.Map      // pending hash key -> where Stale stopped reading it (outbox.go)
	restocking     restocks      // moves of units under way (shards.go)
	finishAfter    time.Duration // FinishMoves leaves younger moves to their mover
	campaignShards func(ctx context.Context, ids []int64) (map[int64]int, error)

	returns *batch.Committer[seckill.UnitReturn, returnOutcome] // ReturnUnit's group commit (returns.go)
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
		rdb:    rdb,
		keys:   keys{prefix: opts.Prefix},
		logger: logger,

		stockChannel: channelOf(rdb, keys{prefix: opts.Prefix}.stockReturned()),
		local:        newLocal(ttl),
		admits:       admits,
		userBurst:    max(opts.UserBurst, 1),
		addrBurst:    max(opts.AddressBurst, 1),

		campaignShards: opts.CampaignShards,
		finishAfter:    finishMovesAfter,
	}
	a.userEvery = gcraInterval(opts.UserRate)
	a.addrEvery = gcraInterval(opts.AddressRate)
	if opts.WrongAnswerWait >= 0 {
		wait := cmp.Or(opts.WrongAnswerWait, seckill.DefaultWrongAnswerWait)
		a.wrongWait = max(wait.Milliseconds(), 1)
		a.wrongMax = max(cmp.Or(opts.WrongAnswerWaitMax, seckill.DefaultMaxWrongAnswerWait).Milliseconds(), a.wrongWait)
	}
	a.returns = batch.New(a.returnBatch, batch.Options{MaxBatch: maxReturnBatch, Flushes: returnFlushes, Backlog: returnBacklog})
	a.fixArgs()
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

// Load loads every script into Redis (SCRIPT LOAD; on a cluster, into every
// node), so that the first EVALSHA finds them. A node that loses them later
// (SCRIPT FLUSH, a restart, a failover) costs one EVAL per call it refused
// (runScripts), not an error.
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
	l, err := listen(ctx, a.rdb, a.stockChannel, a.logger, func(payload string) {
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

// stockReturned drops this process's mark for the campaign and tells the
// others. A lost message only delays them by SoldOutTTL, so a failure to
// publish is logged, not returned.
func (a *Admitter) stockReturned(ctx context.Context, voucherID int64) {
	a.local.invalidate(voucherID)
	if err := publish(context.WithoutCancel(ctx), a.rdb, a.stockChannel, voucherID); err != nil {
		a.logger.WarnContext(ctx, "publish stock_returned; other processes catch up after the sold-out TTL",
			"voucher_id", voucherID, "err", err)
	}
}
