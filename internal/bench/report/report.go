// Package report turns what a bench run recorded into its report: the
// figures of each target, the verdict on its books, the comparisons, and
// how they are written for people (text, live progress) and programs
// (JSON).
package report

import (
	"fmt"
	"slices"
	"time"

	"seckill/internal/bench/load"
	"seckill/internal/seckill"
)

// Load modes, as LoadInfo.Mode names them (load.ModeBurst, ...).
const (
	ModeBurst  = load.ModeBurst
	ModeOpen   = load.ModeOpen
	ModeClosed = load.ModeClosed
)

// Targets a run can measure: the server under test and the servers it is
// compared with.
const (
	TargetSeckill = "seckill" // the server at --url (with HS256 tokens)
	TargetRS256   = "rs256"   // the server at --url with an identity provider's RS256 tokens
	TargetES256   = "es256"   // the same with ES256 tokens
	TargetSync    = "sync"    // the seed's synchronous design, started by the bench
	TargetCeiling = "ceiling" // the admission script behind a bare handler, started by the bench
	// TargetCeilingProcess is the same handler in a process of its own
	// (seckill-bench serve-ceiling), as seckill serve is.
	TargetCeilingProcess = "ceiling-process"
	TargetEverysec       = "everysec" // seckill on a private Redis with appendfsync everysec
	TargetAlways         = "always"   // seckill on a private Redis with appendfsync always
	TargetNoWait         = "no-wait"  // seckill on a private Redis master with a replica, no WAIT
	TargetWait           = "wait"     // the same, each admission confirmed by the replica (WAIT)
	TargetNoLimit        = "no-limit" // seckill on a private Redis without the shared per-user and per-address limits
	TargetLimit          = "limit"    // the same with both limits on, at rates that never refuse the load
	TargetBase           = "base"     // the BASE build of --compare base, on a private Redis and database
	TargetHead           = "head"     // the working tree's build, the same way
)

// Where a run's orders were verified.
const (
	SourcePostgres = "postgres"
	SourceGraphQL  = "graphql"
	SourceRedis    = "redis" // the ceiling: admissions stay pending in Redis
)

// Result is what one seckill-bench run measured: a Report per target, run
// one after the other with the same load, and how they compare.
type Result struct {
	Load        LoadInfo     `json:"load"`
	Runs        []*Report    `json:"runs"`
	Comparisons []Comparison `json:"comparisons,omitempty"`
	// Builds is what --compare base measured instead of Load and Runs.
	Builds *Builds `json:"base_compare,omitempty"`
	// Storm is what --expiry-storm measured instead of Load and Runs.
	Storm *Storm `json:"expiry_storm,omitempty"`
	// CloseStorm is what --cancel-storm or --payment-storm measured
	// instead of Load and Runs.
	CloseStorm  *CloseStorm `json:"close_storm,omitempty"`
	Interrupted bool        `json:"interrupted,omitempty"`
}

// AllRuns returns every run of the result, those of --compare base too.
func (res *Result) AllRuns() []*Report {
	out := slices.Clone(res.Runs)
	if res.Builds != nil {
		for _, l := range res.Builds.Loads {
			out = append(out, l.Runs...)
		}
	}
	var storm []*Report
	if s := res.Storm; s != nil {
		storm = []*Report{s.Alone, s.Sale, s.During}
	}
	if s := res.CloseStorm; s != nil {
		storm = []*Report{s.Alone, s.Sale, s.During}
	}
	for _, r := range storm {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}

// LoadInfo describes the load every target received.
type LoadInfo struct {
	Mode        string   `json:"mode"` // one of the Mode constants
	Users       int      `json:"users"`
	Attempts    int      `json:"attempts,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"`
	Rate        float64  `json:"rate,omitempty"`
	DurationS   float64  `json:"duration_s,omitempty"`
	RampS       float64  `json:"ramp_s,omitempty"`
	MaxInFlight int      `json:"max_in_flight,omitempty"`
	TimeoutS    float64  `json:"timeout_s"`
	Warm        bool     `json:"warm,omitempty"` // connections opened before the clock started
	Stock       int64    `json:"stock"`
	Pay         *PayLoad `json:"pay,omitempty"` // the buyers pay (--pay-ratio)
	// WaitingRoom: every buyer went through the campaign's waiting room,
	// each sending one purchase at their turn, or none (--waiting-room).
	WaitingRoom bool `json:"waiting_room,omitempty"`
}

// PayLoad is how the buyers of a run pay.
type PayLoad struct {
	Ratio   float64 `json:"ratio"`
	DelayS  float64 `json:"delay_s"`
	WindowS float64 `json:"window_s,omitempty"` // the created campaign's pay window; 0: the server's
}

// Report is what one target's run came to.
type Report struct {
	Target string `json:"target"` // one of the Target constants
	// Round numbers the runs of a target that is measured more than once
	// (--compare base alternates base and head, --rounds with --compare
	// ceiling seckill and the ceiling); 0 otherwise.
	Round     int    `json:"round,omitempty"`
	URL       string `json:"url"`
	VoucherID int64  `json:"voucher_id"`
	// VoucherOf says whose voucher VoucherID is when it is not the server
	// under test's: a comparison server's own database or keys.
	VoucherOf   string    `json:"voucher_of,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	Interrupted bool      `json:"interrupted,omitempty"`

	Sent       int64                `json:"sent"`
	Answered   int64                `json:"answered"` // with an outcome
	Failed     int64                `json:"failed"`   // no outcome: HTTP, GraphQL or transport error
	Dropped    int64                `json:"dropped,omitempty"`
	Late       int64                `json:"late,omitempty"`
	MaxLateMs  float64              `json:"max_late_ms,omitempty"`
	ElapsedS   float64              `json:"elapsed_s"`
	Throughput float64              `json:"requests_per_s"` // answered per second
	Latency    Latency              `json:"latency_ms"`
	Outcomes   map[string]int64     `json:"outcomes"`
	Errors     map[string]ErrorStat `json:"errors,omitempty"`
	Selling    *Phase               `json:"selling,omitempty"`  // requests sent before the first SOLD_OUT
	SoldOut    *Phase               `json:"sold_out,omitempty"` // requests sent after it
	Arrivals   *Arrivals            `json:"arrivals,omitempty"` // when the purchases left

	Stock            int64        `json:"stock"` // units on sale when the run began
	Accepted         int64        `json:"accepted"`
	DuplicateAnswers int64        `json:"duplicate_answers"` // an order id or a user accepted twice
	Persistence      *Persistence `json:"persistence,omitempty"`
	Server           *ServerStats `json:"server,omitempty"`
	// CPU is what each local process spent from the start of the load
	// until the last accepted order was in Postgres, from /proc.
	CPU *CPU `json:"cpu,omitempty"`
	// Shards is the campaign's stock shards and Masters what each Redis
	// master ran during the load (--shards on a cluster).
	Shards  int          `json:"shards,omitempty"`
	Masters []MasterLoad `json:"redis_masters,omitempty"`
	// Room is the run through the campaign's waiting room
	// (--waiting-room); nil without one.
	Room *Room `json:"waiting_room,omitempty"`

	OK      bool   `json:"ok"`
	Verdict string `json:"verdict"`
}

// Label names the run in the text report: its target, and its round.
func (r *Report) Label() string {
	if r.Round > 0 {
		return fmt.Sprintf("%s #%d", r.Target, r.Round)
	}
	return r.Target
}

// Arrivals sums up when a run's purchases left (with --challenge, after
// each buyer solved theirs): how far a challenge spreads the opening peak.
type Arrivals struct {
	SpreadS   float64 `json:"spread_s"`   // the span of the middle 80% of the purchases
	PeakPerS  int64   `json:"peak_per_s"` // purchases in the busiest second
	PeakShare float64 `json:"peak_share"` // the busiest second's share of all purchases
}

// Latency percentiles in milliseconds, over answered requests.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Phase is the part of a run before or after the campaign sold out.
type Phase struct {
	Answered   int64   `json:"answered"`
	ElapsedS   float64 `json:"elapsed_s"`
	Throughput float64 `json:"requests_per_s"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
}

// ErrorStat counts one kind of failed request, with the first message seen.
type ErrorStat struct {
	Count   int64  `json:"count"`
	Example string `json:"example"`
}

// Persistence is what the system of record holds after the run.
type Persistence struct {
	Source   string  `json:"source"` // one of the Source constants
	Complete bool    `json:"complete"`
	WaitedS  float64 `json:"waited_s"`

	Rows           int64 `json:"rows"`            // orders of this run's users
	FailedOrders   int64 `json:"failed_orders"`   // admissions recorded as FAILED
	DuplicateUsers int64 `json:"duplicate_users"` // rows beyond one per (voucher, user)
	DuplicateIDs   int64 `json:"duplicate_ids"`
	Lost           int64 `json:"lost"`       // ACCEPTED answers without a row
	Unexpected     int64 `json:"unexpected"` // rows no answer accepted

	PostgresStock  *int64 `json:"postgres_stock,omitempty"`  // units left in Postgres
	Sold           *int64 `json:"sold,omitempty"`            // GraphQL seckill.sold
	RedisRemaining *int64 `json:"redis_remaining,omitempty"` // live admission counter
	RedisPending   *int64 `json:"redis_pending,omitempty"`   // admitted, not yet persisted
	MaxQueueDepth  *int64 `json:"max_queue_depth,omitempty"` // most pending admissions seen

	// Payments is what became of the orders when the buyers paid
	// (seckill-bench --pay-ratio); nil otherwise.
	Payments *Payments `json:"payments,omitempty"`

	// Lag is how long after its ACCEPTED answer each order reached
	// Postgres (--expiry-storm's sales).
	Lag *Lag `json:"lag,omitempty"`

	LastCreatedAfterMs *float64 `json:"last_created_after_last_accepted_ms,omitempty"`
	PersistedPerS      *float64 `json:"persisted_per_s,omitempty"`
	Note               string   `json:"note,omitempty"`
}

// ServerStats samples the server's /metrics during the run.
type ServerStats struct {
	HeapStartMB     float64 `json:"heap_start_mb"`
	HeapEndMB       float64 `json:"heap_end_mb"`
	HeapMaxMB       float64 `json:"heap_max_mb"`
	RSSStartMB      float64 `json:"rss_start_mb"`
	RSSEndMB        float64 `json:"rss_end_mb"`
	RSSMaxMB        float64 `json:"rss_max_mb"`
	GoroutinesStart int64   `json:"goroutines_start"`
	GoroutinesEnd   int64   `json:"goroutines_end"`
	GoroutinesMax   int64   `json:"goroutines_max"`
	Samples         int     `json:"samples"`
	// Funnel is what the server's funnel (seckill_purchase_funnel_total)
	// counted during the run, by layer: the share of attempts each layer
	// stopped. Nil when the server exports none. It counts every client of
	// the server, not only the bench.
	Funnel map[string]int64 `json:"funnel,omitempty"`
}

// Comparison relates one run to another: seckill to a compared server, or
// appendfsync always to everysec.
type Comparison struct {
	Base            string  `json:"base"`
	Other           string  `json:"other"`
	ThroughputRatio float64 `json:"throughput_ratio"` // base / other
	P50Ratio        float64 `json:"p50_ratio"`        // base / other
	P99Ratio        float64 `json:"p99_ratio"`        // base / other
	// Rounds is how many rounds each side ran (--rounds), whose medians
	// the ratios are; RoundRatios the throughput ratio round by round. 0
	// and none for one run each.
	Rounds      int       `json:"rounds,omitempty"`
	RoundRatios []float64 `json:"round_ratios,omitempty"`
	Text        string    `json:"text"`
}

// Payments is what the buyers of a run with payment did after ACCEPTED,
// what became of their orders, and the campaign's books at the end.
type Payments struct {
	// What the buyers and the simulated provider did.
	Created      int64  `json:"payments_created"` // createPayment answered
	Confirmed    int64  `json:"confirmed"`        // webhook applied, payment SUCCEEDED
	Late         int64  `json:"late"`             // webhook applied after the order closed: REFUND_NEEDED
	Unpaid       int64  `json:"unpaid"`           // buyers who chose not to pay
	Closed       int64  `json:"closed"`           // orders closed before their payment was created
	Errors       int64  `json:"errors"`           // createPayment or webhook calls that failed
	ErrorExample string `json:"error_example,omitempty"`

	// The run's accepted orders by status in Postgres.
	Paid        int64 `json:"paid"`
	Awaiting    int64 `json:"awaiting"`
	Expired     int64 `json:"expired"`
	Cancelled   int64 `json:"cancelled"`
	Failed      int64 `json:"failed"`
	Unaccounted int64 `json:"unaccounted"` // accepted orders in no status at all
	// Resold is the acceptances beyond the stock: each took a unit that an
	// expired or cancelled order gave back.
	Resold int64 `json:"resold"`
	// PaidUnconfirmed are PAID orders the provider never confirmed;
	// ConfirmedUnpaid confirmed payments whose order is not PAID.
	PaidUnconfirmed int64 `json:"paid_unconfirmed"`
	ConfirmedUnpaid int64 `json:"confirmed_unpaid"`

	// The campaign's books: initial = remaining + queued + awaiting + paid
	// (Redis: remaining, queued; Postgres: the rest, the whole campaign).
	Books Books `json:"books"`
}

// Books is a campaign's stock equation as read at the end of a run; the
// domain judges it (Balance).
type Books struct {
	Initial   int64 `json:"initial"`
	Remaining int64 `json:"remaining"` // Redis
	Queued    int64 `json:"queued"`    // Redis: admitted, not persisted yet
	Awaiting  int64 `json:"awaiting"`  // Postgres: CREATED
	Paid      int64 `json:"paid"`      // Postgres: PAID
	// Taken is initial stock minus Postgres's stock: it must equal
	// Awaiting + Paid.
	Taken int64 `json:"taken"`
	// DuplicateBuyers counts buyers holding more than one live (CREATED or
	// PAID) order of the campaign.
	DuplicateBuyers int64 `json:"duplicate_buyers"`
	Balanced        bool  `json:"balanced"` // the domain's verdict is ok
	Known           bool  `json:"known"`    // Redis holds the campaign
}

// NewBooks records a balance the domain read (seckill.ReadBalance).
func NewBooks(b seckill.Balance) Books {
	return Books{
		Initial: b.Totals.InitialStock, Remaining: b.Live.Remaining, Queued: b.Live.Queued,
		Awaiting: b.Totals.Awaiting, Paid: b.Totals.Paid, Taken: b.Totals.Taken(),
		Balanced: b.State == seckill.BalanceOK, Known: b.Live.Known,
	}
}

// Balance is the domain's verdict on the books as recorded
// (seckill.CheckBalance): the stock equation and Postgres's own check.
func (b Books) Balance() seckill.Balance {
	return seckill.CheckBalance(
		seckill.LiveCounts{Remaining: b.Remaining, Queued: b.Queued, Known: b.Known},
		seckill.CampaignTotals{InitialStock: b.Initial, Stock: b.Initial - b.Taken,
			Awaiting: b.Awaiting, Paid: b.Paid, Orders: b.Awaiting + b.Paid})
}
