// Package seckill is the domain of a flash-sale service: vouchers, their
// campaigns, orders, the outcomes of a purchase, the error codes, and the
// Service that orchestrates them through the small interfaces below. It
// imports only the standard library; adapters implement the interfaces.
package seckill

import (
	"context"
	"errors"
	"time"
)

// The ports: each part of the domain declares the small interface it needs
// of each adapter (STYLE.md: a port has the methods one caller needs), even
// where one adapter implements several. Postgres (internal/store):
// CatalogStore, Auditor, OrderStore, RecoveryStore, OrderLife, RefundStore,
// OperatorStore. Redis (internal/admission): Admitter, Outbox, Rebuilder,
// CampaignAdmitter, UnitReturner, StatusBus. Asynq (jobs): Enqueuer,
// RefundQueue.

// OrderStore is what purchases need of the system of record (Postgres):
// orders.
type OrderStore interface {
	// Order returns a persisted order: CREATED and after, or FAILED.
	// ENOTFOUND.
	Order(ctx context.Context, id int64) (*Order, error)
	// OrdersByUser returns a user's persisted orders, newest first.
	OrdersByUser(ctx context.Context, userID int64, limit int) ([]*Order, error)
	// PersistOrders writes admissions as orders, idempotently: an admission
	// persisted before is reported CREATED again, never written twice. One
	// that can never be persisted (no stock left in Postgres, the user holds
	// another order for the campaign, the campaign is gone, the campaign was
	// rebuilt in a later epoch so the admission was lost, the id is another
	// user's) is recorded as FAILED with a reason. An error means nothing
	// was decided (retry), except one that matches ErrOutcomeUnknown: the
	// batch may have been written; a retry answers for it either way.
	PersistOrders(ctx context.Context, adms []Admission) ([]PersistOutcome, error)
}

// RecoveryStore is what recovery needs of the system of record: which
// campaigns to watch, and their state to rebuild Redis from.
type RecoveryStore interface {
	// LiveCampaigns returns the ids of the campaigns that have not ended.
	LiveCampaigns(ctx context.Context) ([]int64, error)
	// CampaignsEndingAfter returns the ids of the campaigns that have not
	// ended or ended after t.
	CampaignsEndingAfter(ctx context.Context, t time.Time) ([]int64, error)
	// CampaignsEndedBetween returns the ids of the campaigns whose end is
	// in [from, to), in id order.
	CampaignsEndedBetween(ctx context.Context, from, to time.Time) ([]int64, error)
	// RebuildCampaign moves a campaign to its next epoch and returns its
	// state in it: what Redis needs to admit again after losing data. It
	// holds the campaign's row lock while it reads, so no order from an
	// earlier epoch takes stock afterwards (PersistOrders fails those with
	// FailureLost). With shards (stock shards of a campaign of several; nil:
	// all) it moves only those shards to the new epoch, and the others'
	// orders keep taking stock in theirs; the state's Shards names them.
	// ENOTFOUND; EUNAVAILABLE when the epochs are used up; EINVALID for a
	// shard the campaign does not have.
	RebuildCampaign(ctx context.Context, voucherID int64, shards []int) (WarmState, error)
	// CampaignEpochs returns the epoch of a campaign and of each of its
	// stock shards. ENOTFOUND.
	CampaignEpochs(ctx context.Context, voucherID int64) (Epochs, error)
}

// CatalogStore is what the catalog of vouchers and campaigns needs of the
// system of record.
type CatalogStore interface {
	// CreateVoucher inserts v and its campaign and sets their ids and times.
	CreateVoucher(ctx context.Context, v *Voucher) error
	// DeleteVoucher removes a voucher that has no orders (used to undo a
	// creation that could not be warmed into Redis). ENOTFOUND, ECONFLICT.
	DeleteVoucher(ctx context.Context, id int64) error
	// Voucher returns one voucher with its campaign. ENOTFOUND.
	Voucher(ctx context.Context, id int64) (*Voucher, error)
	// Vouchers returns vouchers in id order.
	Vouchers(ctx context.Context, filter VoucherFilter) ([]*Voucher, error)
	// CampaignQuiz returns a campaign's quiz questions (none without a
	// quiz).
	CampaignQuiz(ctx context.Context, voucherID int64) ([]QuizQuestion, error)
	// ChangeCampaign locks the campaign of a voucher, lets change modify the
	// voucher (texts) and its campaign (window, pause, stock, challenge; its
	// Quiz holds the questions stored, and the change may replace them),
	// and writes the result together with the audit entry that change
	// returns, in one transaction. It returns the voucher as written.
	// ENOTFOUND; an error from change is returned as it is and nothing is
	// written; EINVALID when the database's rules reject the result.
	ChangeCampaign(ctx context.Context, voucherID int64, change func(v *Voucher) (AuditEntry, error)) (*Voucher, error)
}

// Auditor records who changed what (the audit log, in Postgres).
type Auditor interface {
	// AddAudit records an entry.
	AddAudit(ctx context.Context, e AuditEntry) error
}

// Admitter decides purchases atomically (Redis): the hot path.
type Admitter interface {
	// Admit decides one purchase. On ACCEPTED the admission is recorded as
	// pending in the same atomic step. The same step takes the attempt
	// from the user's shared limit, checks t against the campaign's
	// challenge (a token is spent by its first answer; a refused one
	// answers its Refusal) and applies the campaign's brake. ENOTFOUND when
	// Redis does not know the campaign; ErrRebuildNeeded when it must be
	// rebuilt first; EUNAVAILABLE when Redis cannot be reached in time.
	// ErrNotReplicated, with OutcomeAccepted and the admission, when Redis
	// took it but fewer of its replicas than required confirmed it in
	// time: a failover could still lose it, so the caller must make it
	// durable another way or release it. A refusal comes with no
	// admission, only FromMemory when the process answered it itself.
	Admit(ctx context.Context, voucherID, userID int64, t Ticket) (Outcome, Admission, error)
	// Remaining returns the live stock of the campaigns Redis holds.
	Remaining(ctx context.Context, voucherIDs []int64) (map[int64]int64, error)
	// Pending returns an admission that is not persisted yet. ENOTFOUND.
	Pending(ctx context.Context, orderID int64) (*Admission, error)
}

// Outbox is the admissions Redis holds as pending until Postgres has them.
type Outbox interface {
	// Ack forgets admissions that Postgres now holds.
	Ack(ctx context.Context, adms []Admission) error
	// Release gives a failed admission's unit back, and its buyer slot
	// unless keepBuyer is set (the user holds another order); it reports
	// false when the admission was not pending (released before).
	Release(ctx context.Context, adm Admission, keepBuyer bool) (bool, error)
	// Stale returns up to limit admissions of the campaigns voucherIDs
	// pending for longer than age.
	Stale(ctx context.Context, voucherIDs []int64, age time.Duration, limit int) ([]Admission, error)
	// PendingOf returns every admission of a campaign still pending.
	PendingOf(ctx context.Context, voucherID int64) ([]Admission, error)
}

// Rebuilder restores campaigns that Redis lost, and trims those long ended.
type Rebuilder interface {
	// NeedsRebuild returns those of ids whose campaign Redis does not hold
	// or holds in a state it must not admit from (see ErrRebuildNeeded).
	NeedsRebuild(ctx context.Context, ids []int64) ([]int64, error)
	// BeginRebuild takes the campaign's rebuild lock, across every process,
	// and stops its admissions, if the campaign needs a rebuild (decided in
	// the same step as NeedsRebuild decides it); ok is false while another
	// process holds the lock or when the campaign needs none. For a
	// campaign of several stock shards of which only some need it (their
	// master failed over), the lock names those shards: only they stop,
	// and the others keep selling.
	BeginRebuild(ctx context.Context, voucherID int64) (lock RebuildLock, ok bool, err error)
	// AbortRebuild releases the lock BeginRebuild took, if it is still
	// token's, after a rebuild failed before FinishRebuild; the campaign
	// still admits nobody until it is rebuilt.
	AbortRebuild(ctx context.Context, voucherID int64, token string) error
	// FinishRebuild installs st in place of everything Redis held for the
	// campaign (for the shards st.Shards names, when it names some) and
	// releases the lock; false when the lock was no longer token's.
	FinishRebuild(ctx context.Context, token string, st WarmState) (bool, error)
	// Retire trims those of ids that ended more than after ago, have no
	// pending admission and are not being rebuilt, to what answering ENDED
	// needs; it returns how many it trimmed.
	Retire(ctx context.Context, ids []int64, after time.Duration) (int, error)
}

// CampaignAdmitter installs campaigns in admission and applies their
// changes.
type CampaignAdmitter interface {
	// Warm installs a campaign unless Redis already holds it; it reports
	// whether it installed it.
	Warm(ctx context.Context, st WarmState) (bool, error)
	// UpdateCampaign sets the window and the pause of a campaign admission
	// holds. ENOTFOUND when it does not hold it.
	UpdateCampaign(ctx context.Context, voucherID int64, begin, end time.Time, paused bool) error
	// AddStock puts n more units on sale. ENOTFOUND when admission does not
	// hold the campaign.
	AddStock(ctx context.Context, voucherID, n int64) error
	// UpdateGuard sets a campaign's challenge and brake in admission.
	UpdateGuard(ctx context.Context, voucherID int64, challenge ChallengeKind, brake int) error
}

// ErrRebuildNeeded is what Admit answers for a campaign whose Redis state
// may be behind what it acknowledged (Redis restarted or failed over since
// it was installed), that is being rebuilt, or whose epoch is used up. The
// Service rebuilds it from Postgres and asks again.
var ErrRebuildNeeded = &Error{Code: EUNAVAILABLE, Message: "the sale is being restored; try again in a moment"}

// ErrNotReplicated is what Admit answers, with the admission, for an
// admission Redis made whose replicas did not confirm it in time. The
// Service persists it to Postgres at once or releases it; a buyer sees this
// error only when neither could be done.
var ErrNotReplicated = &Error{Code: EUNAVAILABLE, Message: "the sale could not confirm your order in time; try again"}

// ErrOutcomeUnknown is in the chain of a store error after which the write
// may stand all the same: its commit was sent and no answer came back (a
// connection cut, a deadline during the COMMIT). errors.Is tells it. Undoing
// what such a write would have recorded elsewhere (releasing the unit of an
// order Postgres may hold) would make the two stores disagree: leave it to
// the reconciler, whose write answers for it either way.
var ErrOutcomeUnknown = errors.New("the write may have been made: its commit went unanswered")

// Enqueuer hands admissions to the persistence workers (Asynq).
type Enqueuer interface {
	// EnqueuePersist hands one fresh admission over, to be enqueued soon,
	// batched with others, without waiting; a failure shows up later as a
	// stale admission, which the reconciler requeues.
	EnqueuePersist(ctx context.Context, adm Admission) error
	// RequeuePersist enqueues one admission on its own, as a task whose id
	// is derived from the order id, and waits: requeuing an admission whose
	// task is still queued (or retrying, or archived) makes no second task.
	RequeuePersist(ctx context.Context, adm Admission) error
}

// StatusBus carries order status changes between processes (Redis pub/sub).
// Delivery is at most once: subscribers read the current state first.
type StatusBus interface {
	// Publish sends events, in one message where the bus can.
	Publish(ctx context.Context, evs ...StatusEvent) error
	// Subscribe delivers events for orderID until cancel is called or ctx
	// ends; the channel is closed then.
	Subscribe(ctx context.Context, orderID int64) (events <-chan StatusEvent, cancel func(), err error)
}

// Limiter bounds how often one user may try to buy one campaign, in the
// process's memory.
type Limiter interface {
	Allow(voucherID, userID int64) bool
}

// NoLimit is the Limiter of a process without a per-user limit in memory.
type NoLimit struct{}

// Allow implements Limiter: every attempt is allowed.
func (NoLimit) Allow(int64, int64) bool { return true }
