package seckill

import "time"

// OrderStatus is where an accepted order stands.
type OrderStatus string

const (
	OrderQueued    OrderStatus = "QUEUED"    // admitted in Redis, not yet in Postgres
	OrderCreated   OrderStatus = "CREATED"   // persisted, awaiting payment until PayBy
	OrderPaid      OrderStatus = "PAID"      // the payment provider confirmed payment
	OrderCancelled OrderStatus = "CANCELLED" // cancelled before payment; unit and buyer slot returned
	OrderExpired   OrderStatus = "EXPIRED"   // not paid by PayBy; unit and buyer slot returned
	OrderFailed    OrderStatus = "FAILED"    // could not be persisted; stock and buyer slot returned
)

// Terminal reports whether no further change can follow.
func (s OrderStatus) Terminal() bool {
	return s == OrderPaid || s == OrderCancelled || s == OrderExpired || s == OrderFailed
}

// Order is one user's purchase of one seckill voucher.
type Order struct {
	ID            int64
	VoucherID     int64
	UserID        int64
	Status        OrderStatus
	CreatedAt     time.Time
	FailureReason string

	// Set once the order is persisted (CREATED and after).
	Amount   int64     // the voucher's pay value at purchase, in cents
	PayBy    time.Time // unpaid by then, the order expires
	PaidAt   time.Time // zero unless PAID
	ClosedAt time.Time // when it was CANCELLED or EXPIRED; zero otherwise
}

// Order ids carry their campaign: the high 32 bits are the voucher id, the
// low 32 bits the campaign's epoch (10 bits) and a sequence within the epoch
// (22 bits) that the admission script increments. That makes them unique
// across every API instance without a second round trip, and lets any
// process find the campaign (and its Redis keys) of an id.
//
// The epoch is kept in Postgres and moves forward each time the campaign's
// Redis state is rebuilt from Postgres (Redis lost data or failed over, or
// the epoch's sequence is used up), so an id is never handed out twice,
// whatever Redis forgot: a rebuilt campaign counts in a new epoch.
const (
	orderSeqBits   = 32
	orderEpochBits = 10
	epochSeqBits   = orderSeqBits - orderEpochBits

	// MaxEpochSeq is the last sequence of one epoch: a campaign whose
	// epoch handed it out must be rebuilt into the next epoch.
	MaxEpochSeq = 1<<epochSeqBits - 1
	// MaxEpoch is the last epoch of a campaign; a campaign that would need
	// another rebuild stops selling (EUNAVAILABLE).
	MaxEpoch = 1<<orderEpochBits - 1
)

// Shards (issue #21): a campaign may sell from up to MaxShards Redis stock
// shards, each with its own sequence, so an id also names its shard. Shard
// 0's ids are the layout above, unchanged: bit 62 clear, the voucher id in
// bits 32 to 61 (below 2^30). An id of shard k >= 1 sets bit 62 (a flag no
// id of the old layout has: its voucher ids are below 2^30), puts k in bits
// 56 to 61 and the voucher id in bits 32 to 55 (below 2^24: a campaign of
// more than one shard needs such an id, which Postgres enforces). The low 32
// bits are the epoch and the shard's sequence, as before. So ids issued
// before shards parse as they did, and ids of different shards, epochs or
// sequences differ.
const (
	shardFlag      = 1 << 62
	shardShift     = 56
	shardBits      = 6
	orderShardMask = 1<<shardBits - 1
	// MaxOrderVoucherID is the largest voucher id an id of shard 0 holds;
	// MaxShardedVoucherID the largest of a campaign of several shards.
	MaxOrderVoucherID   = 1<<30 - 1
	MaxShardedVoucherID = 1<<24 - 1
)

// OrderID composes an order id of shard 0 from a voucher id and the low 32
// bits (epoch and sequence) that the admission script returned.
func OrderID(voucherID int64, seq int64) int64 { return voucherID<<orderSeqBits | seq }

// ShardOrderID composes an order id of one shard of a campaign; shard 0's
// is OrderID's.
func ShardOrderID(voucherID int64, shard int, seq int64) int64 {
	if shard == 0 {
		return OrderID(voucherID, seq)
	}
	return shardFlag | int64(shard)<<shardShift | voucherID<<orderSeqBits | seq
}

// SplitOrderID returns the voucher id and the low 32 bits (epoch and
// sequence) of an order id.
func SplitOrderID(id int64) (voucherID, seq int64) {
	voucherID, _, seq = SplitShardOrderID(id)
	return voucherID, seq
}

// SplitShardOrderID returns the voucher id, the shard and the low 32 bits
// (epoch and sequence) of an order id.
func SplitShardOrderID(id int64) (voucherID int64, shard int, seq int64) {
	seq = id & (1<<orderSeqBits - 1)
	if id < 0 || id&shardFlag == 0 {
		return id >> orderSeqBits, 0, seq
	}
	return id >> orderSeqBits & MaxShardedVoucherID, int(id >> shardShift & orderShardMask), seq
}

// OrderEpoch returns the epoch in which an order id was handed out.
func OrderEpoch(id int64) int64 { return id & (1<<orderSeqBits - 1) >> epochSeqBits }

// Outcome is the answer to a purchase: expected business results are data,
// not errors.
type Outcome string

const (
	OutcomeAccepted         Outcome = "ACCEPTED"
	OutcomeSoldOut          Outcome = "SOLD_OUT"
	OutcomeAlreadyPurchased Outcome = "ALREADY_PURCHASED"
	OutcomeNotStarted       Outcome = "NOT_STARTED"
	OutcomeEnded            Outcome = "ENDED"
	OutcomeRateLimited      Outcome = "RATE_LIMITED"
	OutcomePaused           Outcome = "PAUSED"

	// The challenge (challenge.go): none given where the campaign asks
	// for one; a wrong answer (or a token we did not sign); a token past its
	// expiry; another user's or another campaign's token; a token used once
	// already.
	OutcomeChallengeRequired Outcome = "CHALLENGE_REQUIRED"
	OutcomeChallengeWrong    Outcome = "CHALLENGE_WRONG"
	OutcomeChallengeExpired  Outcome = "CHALLENGE_EXPIRED"
	OutcomeChallengeNotYours Outcome = "CHALLENGE_NOT_YOURS"
	OutcomeChallengeUsed     Outcome = "CHALLENGE_USED"

	// OutcomeTryAgain: a campaign of several stock shards has units left,
	// but none yet where this buyer's purchase is decided; they are on
	// their way (shards.go). Never a false SOLD_OUT: retry after RetryAfter.
	OutcomeTryAgain Outcome = "TRY_AGAIN"

	// The waiting room (waitingroom.go): the campaign lets buyers in
	// through it and the purchase came without a pass of the buyer's, or
	// with one whose time is over.
	OutcomePassRequired Outcome = "PASS_REQUIRED"
	OutcomePassExpired  Outcome = "PASS_EXPIRED"
)

// Message is the human sentence shown with an outcome.
func (o Outcome) Message() string {
	switch o {
	case OutcomeAccepted:
		return "order accepted; it is being created"
	case OutcomeSoldOut:
		return "sold out"
	case OutcomeAlreadyPurchased:
		return "you have already bought this voucher"
	case OutcomeNotStarted:
		return "the sale has not started yet"
	case OutcomeEnded:
		return "the sale has ended"
	case OutcomeRateLimited:
		return "too many attempts; try again in a moment"
	case OutcomePaused:
		return "the sale is paused"
	case OutcomeChallengeRequired:
		return "this sale asks you to solve a challenge first (seckillChallenge)"
	case OutcomeChallengeWrong:
		return "the answer to the challenge is wrong"
	case OutcomeChallengeExpired:
		return "the challenge has expired; ask for a new one"
	case OutcomeChallengeNotYours:
		return "the challenge was given to another user or for another sale"
	case OutcomeChallengeUsed:
		return "the challenge has been used already; ask for a new one"
	case OutcomePassRequired:
		return "this sale lets buyers in through its waiting room: join it (joinWaitingRoom) and buy with the pass your turn gives"
	case OutcomePassExpired:
		return "your turn in the waiting room is over: its pass has expired"
	case OutcomeTryAgain:
		return "units are on their way; try again in a moment"
	}
	return string(o)
}

// Admission is a purchase that Redis accepted and Postgres does not hold yet.
type Admission struct {
	OrderID    int64     `json:"order_id"`
	VoucherID  int64     `json:"voucher_id"`
	UserID     int64     `json:"user_id"`
	AdmittedAt time.Time `json:"admitted_at"`
	// Trace is the W3C trace context (traceparent) of the request that
	// admitted it, carried in the persistence task so that the write links
	// back to that request's trace; empty when tracing is off. Opaque here.
	Trace string `json:"trace,omitempty"`
	// FromMemory is set on a refusal that Admit answered from the
	// process's own memory (a sold-out or window mark) without asking
	// Redis: the funnel counts those apart. Never stored or sent.
	FromMemory bool `json:"-"`
	// RetryAfter is set on a refusal that makes the user wait after a
	// wrong answer: CHALLENGE_WRONG (the wait it started) and RATE_LIMITED
	// (what is left of it). Never stored.
	RetryAfter time.Duration `json:"-"`
}

// PurchaseResult is what a buyer is told.
type PurchaseResult struct {
	Outcome Outcome
	OrderID int64 // set when Outcome is ACCEPTED
	// RetryAfter is how long the user must wait before trying again,
	// after a wrong answer (CHALLENGE_WRONG, RATE_LIMITED); 0 otherwise.
	RetryAfter time.Duration
}

// Reasons an admission can never be persisted (PersistOutcome.Reason).
const (
	FailureUserHasOrder = "user already holds an order for this voucher"
	FailureNoStock      = "no stock left"
	FailureNoCampaign   = "campaign not found"
	FailureInvalid      = "invalid admission"
	// FailureLost: Redis lost the sale's state after accepting the order
	// (it restarted without its last writes, or failed over to a replica
	// that missed them), and the campaign was rebuilt from Postgres without
	// it. The unit went back on sale; the buyer may try again.
	FailureLost = "the sale's state was lost after this order was accepted; the unit was not kept, try again"
	// FailureConflict: Postgres holds this order id for someone else. It
	// cannot happen while ids are never reused; it is detected, not assumed.
	FailureConflict = "the order id conflicts with another order"
)

// PersistOutcome is what the store did with one admission.
type PersistOutcome struct {
	Admission Admission
	Status    OrderStatus // CREATED (now or earlier) or FAILED
	Reason    string      // why it FAILED
	CreatedAt time.Time
	PayBy     time.Time // when CREATED: unpaid by then, it expires
	Inserted  bool      // CREATED by this call, not found from an earlier delivery
}

// StatusEvent is a change of an order's status.
type StatusEvent struct {
	OrderID int64       `json:"order_id"`
	Status  OrderStatus `json:"status"`
	At      time.Time   `json:"at"`
	Reason  string      `json:"reason,omitempty"`
}

// WarmState is what Redis needs to admit for a campaign that Postgres knows:
// the campaign (its stock, window and epoch) and its buyers.
type WarmState struct {
	Campaign Campaign
	Buyers   []int64 // users holding an order (CREATED) for the campaign
	// Shards names the stock shards a rebuild of some of them moved to
	// Campaign.Epoch (nil: the whole campaign). Those shards start again
	// with no units and their buyers; the units their Redis lost are
	// counted back later (admission's recount), when nothing is left
	// anywhere else.
	Shards []int
}

// RebuildLock is a campaign's rebuild lock as BeginRebuild took it: its
// token, the stock shards the rebuild is for (nil: the whole campaign),
// and, for a campaign of several shards, why Redis needed it (for the
// log; empty when the store does not say).
type RebuildLock struct {
	Token  string
	Shards []int
	Reason string
}

// Epochs is where a campaign's order ids stand: the epoch of each of its
// stock shards. A rebuild of the whole campaign moves every shard to a new
// epoch; one of some shards (those a failover lost) moves only them, to an
// epoch above every other.
type Epochs struct {
	Campaign int64   // the highest; every shard's when Shards is nil
	Shards   []int64 // each shard's, once a rebuild of some moved them alone
}

// Of returns the epoch of one shard.
func (e Epochs) Of(shard int) int64 {
	if shard >= 0 && shard < len(e.Shards) {
		return e.Shards[shard]
	}
	return e.Campaign
}

// OfOrder returns the epoch that the shard an order id names is in now.
func (e Epochs) OfOrder(orderID int64) int64 {
	_, shard, _ := SplitShardOrderID(orderID)
	return e.Of(shard)
}
