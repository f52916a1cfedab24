// Package views renders the dashboard's pages with templ. Each page has its
// view model here; the handlers in package web build them from the domain.
// Every element a test or a script looks for carries a data-testid.
package views

import (
	"time"

	"seckill/internal/seckill"
)

// Meta is what every page's frame needs.
type Meta struct {
	Title string
	Admin string // the signed-in operator; empty on the login page
	Nav   string // the active navigation item: NavCampaigns, NavQueues or NavEvents
}

// Navigation items.
const (
	NavCampaigns = "campaigns"
	NavQueues    = "queues"
	NavEvents    = "events"
)

// LoginPage is the sign-in form.
type LoginPage struct {
	Meta
	User  string
	Next  string
	Error string
	// SSO names the identity provider operators may sign in through
	// instead; empty: local accounts only.
	SSO string
}

// CampaignsPage lists campaigns, newest first.
type CampaignsPage struct {
	Meta
	Live  CampaignsLive
	Older string // URL of the next (older) page; empty on the last
	Newer string // URL of the first page; empty on it
}

// CampaignsLive is the part of the campaigns page that refreshes itself.
type CampaignsLive struct {
	Src    string // URL of this fragment
	Rows   []CampaignRow
	Queues QueuesLive
}

// CampaignRow is one campaign in the list.
type CampaignRow struct {
	ID        int64
	Title     string
	SubTitle  string
	Status    string // a seckill.CampaignStatus
	Begin     time.Time
	End       time.Time
	Initial   int64
	Remaining int64
	Known     bool // admission holds the campaign; Remaining and Queued are live
	Queued    int64
	Sold      int64
	Spark     Spark
}

// QueuesPage shows the Asynq queues.
type QueuesPage struct {
	Meta
	Live QueuesLive
}

// QueuesLive is the part of the queues page that refreshes itself.
type QueuesLive struct {
	Src   string
	Rows  []QueueRow
	Error string
	At    time.Time // when the numbers were read
}

// Queue is one job queue's figures. The web package hands them to its
// Queues source as web.Queue; internal/app converts Asynq's.
type Queue struct {
	Name        string
	Pending     int
	Active      int
	Scheduled   int
	Retry       int
	Archived    int
	Completed   int
	Aggregating int
	// Processed and Failed count tasks today (UTC); a persistence task
	// carries a batch of orders.
	Processed int
	Failed    int
	Latency   time.Duration // the oldest pending task's age
	Paused    bool
}

// QueueRow is one queue as the pages show it: its figures and where the
// queue monitor shows it in detail.
type QueueRow struct {
	Queue
	MonitorURL string
}

// Depth is the work a queue holds: everything not archived or completed.
func (q Queue) Depth() int { return q.Pending + q.Active + q.Scheduled + q.Retry + q.Aggregating }

// CampaignPage is one campaign: live numbers, charts, orders and audit log.
type CampaignPage struct {
	Meta
	Campaign CampaignView
	Live     CampaignLive
	Orders   OrdersView
	Audit    []AuditRow
	Notice   string // what the last action did
	Error    string // why the last action failed
	// StockError and StockValue re-show the add-stock form after a refusal.
	StockError string
	StockValue string
	// Guard is the campaign's challenge, brake and limits, with their form.
	Guard GuardView
	// Refunds lists the campaign's payments owed back.
	Refunds RefundList
}

// RefundList is a campaign's payments owed back or refunded, oldest owed
// first.
type RefundList struct {
	Sending bool // a payment provider takes the refunds; false: none are sent
	Rows    []RefundRow
	More    bool // there are more than the rows shown
}

// RefundRow is one payment owed back.
type RefundRow struct {
	PaymentID  string
	OrderID    int64
	UserID     int64
	Amount     string // with its currency
	Status     string // REFUND_NEEDED, REFUNDING, REFUNDED or REFUND_FAILED
	OwedAt     time.Time
	SentAt     time.Time // zero before the first send
	RefundedAt time.Time
	Sends      int
	Error      string
	Retry      string // URL that sends it again (POST), when it failed
}

// RefundTally is a number of refunds and what they add up to.
type RefundTally struct {
	Count  int64
	Amount string // with the currency; "—" when there are none
}

// GuardView shows and edits what a campaign asks of a purchase beyond
// stock: the challenge (editable before the sale starts), the brake and
// the shared per-user and per-address limits (configuration, read only).
type GuardView struct {
	ID        int64
	Challenge string // NONE, QUIZ, PROOF_OF_WORK
	PoWBits   int
	Quiz      string // one question a line: question | answer | answer
	Questions int
	Brake     int
	UserLimit string // the shared per-user limit in words
	// AddressLimit is the shared per-address limit in words.
	AddressLimit string
	ChallengeRO  bool // the sale has started: the challenge is fixed
	Ended        bool
	Error        string
	Field        string // the field Error is about, if any
}

// CampaignView is a campaign's settings.
type CampaignView struct {
	ID          int64
	ShopID      int64
	Title       string
	SubTitle    string
	Rules       string
	PayValue    int64
	ActualValue int64
	Status      string
	Begin       time.Time
	End         time.Time
	PayWindow   time.Duration // how long a buyer has to pay an order
	Currency    string        // of the prices and payments
	Paused      bool
	Editable    bool // it has not started: texts and times may change
	Ended       bool
	Shards      int // stock shards (1: one Redis hash tag)
	// Room is the campaign's waiting room; nil when it has none.
	Room *RoomSettings
}

// RoomSettings are a waiting room's settings.
type RoomSettings struct {
	OpensBefore    time.Duration // how long before the begin buyers may join
	OpensAt        time.Time
	AdmitPerSecond int           // turns a second
	PassFor        time.Duration // how long a pass lasts from its turn
}

// RoomLive is a waiting room's layers now (seckill.RoomFunnel): everyone
// who joined is waiting or was let through; of those let through, each
// pass is live or expired; Admitted units went to buyers with a pass.
type RoomLive struct {
	Joined     int64
	Waiting    int64
	LetThrough int64
	PassesLive int64
	Expired    int64
	Admitted   int64
	Error      string // why the room could not be read; the numbers are then zero
}

// Unused is the turns that came and bought nothing (yet): let through
// less admitted.
func (r RoomLive) Unused() int64 { return max(0, r.LetThrough-r.Admitted) }

// CampaignLive is the part of the campaign page that refreshes itself.
type CampaignLive struct {
	Src       string
	Status    string
	Initial   int64
	Remaining int64
	Queued    int64
	Sold      int64
	Failed    int64
	Known     bool
	Balance   Balance
	Charts    []Chart

	// After the purchase.
	Awaiting    int64
	OldestPayBy time.Time // zero when nothing awaits payment
	Paid        int64
	Revenue     int64 // minor units of Currency
	Currency    string
	Cancelled   int64
	Expired     int64
	// Refunds of payments owed back, by where they stand.
	RefundsOwed, RefundsSent, RefundsDone, RefundsFailed RefundTally
	RefundsStuck                                         int64 // owed for more than an hour
	// Shards lists each stock shard of a campaign of more than one (nil
	// for one shard).
	Shards []ShardView
	// Room is the waiting room's layers; nil for a campaign without one.
	Room *RoomLive
}

// ShardView is one stock shard of a campaign on its page: its units left
// and pending admissions (Redis), and its admissions a second since the
// page last refreshed (PerSecond; Rate false before a second reading, or
// after the shard was rebuilt).
type ShardView struct {
	Shard             int
	Remaining, Queued int64
	Known             bool
	PerSecond         float64
	Rate              bool
}

// Balance is the consistency check, the domain's seckill.CheckBalance:
// initial stock = remaining (Redis) + queued (Redis) + awaiting payment +
// paid (Postgres), and Postgres's orders agree with its stock.
type Balance struct {
	State     string // BalanceOK, BalanceSettling, BalanceMismatch or BalanceUnknown
	Initial   int64
	Remaining int64
	Queued    int64
	Awaiting  int64
	Paid      int64
	Failed    int64
	Cancelled int64
	Expired   int64
	Diff      int64  // remaining + queued + awaiting + paid - initial; 0 when unknown
	Message   string // why the state is not ok
}

// Balance states, as the domain names them.
const (
	BalanceOK       = string(seckill.BalanceOK)
	BalanceSettling = string(seckill.BalanceSettling)
	BalanceMismatch = string(seckill.BalanceMismatch)
	BalanceUnknown  = string(seckill.BalanceUnknown)
)

// OrdersView is one page of a campaign's orders.
type OrdersView struct {
	Currency string // of the orders' amounts
	Action   string // URL of the search form
	By       string // "order" or "user"
	Query    string
	Status   string // only orders in this status, when set
	CSV      string // URL of the CSV export of the orders shown (their filter)
	Rows     []OrderRow
	Error    string
	Older    string // URL of the next page
	Newer    string // URL of the first page
}

// OrderRow is one order.
type OrderRow struct {
	ID     int64
	UserID int64
	Status string // a seckill.OrderStatus
	At     time.Time
	Reason string
	Amount int64     // minor units of the payments' currency; 0 while QUEUED or FAILED
	PayBy  time.Time // zero while QUEUED or FAILED
	Cancel string    // URL that cancels it (POST), when it awaits payment
}

// AuditRow is one entry of the audit log.
type AuditRow struct {
	At     time.Time
	Actor  string // the operator's name, or the API user's id when API
	API    bool   // made with an API token, not from the dashboard
	Action string
	Detail string
}

// FormPage creates or edits a campaign.
type FormPage struct {
	Meta
	Action string // where the form posts
	Edit   bool
	ID     int64
	// Values are the fields as submitted or stored, by input name.
	Values map[string]string
	// Begin and End are the stored or submitted times, shown in the
	// viewer's zone by the script.
	Begin time.Time
	End   time.Time
	// Errors are messages by field name, shown next to the field.
	Errors map[string]string
	// Invalid are the fields with an error, in the form's order, for the
	// summary above it.
	Invalid []InvalidField
	Error   string
	// Checks are what the browser checks before sending, by field name
	// (the server checks again).
	Checks map[string]Check
}

// InvalidField names a field with an error.
type InvalidField struct {
	Name  string
	Label string
}

// Check is what the browser checks of one field before the form is sent.
type Check struct {
	Required string // the message when empty; "" when optional
	// Min and Max bound a whole number (Max < 0: no upper bound); AtLeast
	// names a field whose number this one must reach. Message is shown
	// when any of them fails.
	Min     int64
	Max     int64
	AtLeast string
	Message string
}

// EventsPage lists the endpoints of order events, with the form that adds
// one; after an add, the new endpoint's secret, shown this once.
type EventsPage struct {
	Meta
	Rows      []EndpointRow
	URL       string // the add form's URL field, after an error
	Error     string
	NewID     int64
	NewURL    string
	NewSecret string
}

// EndpointRow is one endpoint with its deliveries' numbers.
type EndpointRow struct {
	ID          int64
	URL         string
	Source      string // env or dashboard
	Enabled     bool
	Failures    int
	NextAttempt time.Time
	LastError   string
	LastSuccess time.Time
	Pending     int64
	Dead        int64
	Delivered   int64
	Oldest      time.Duration
	Link        string // its deliveries
	Toggle      string // POST here to enable or disable it; empty for the environment's
	ToggleText  string
	Delete      string // POST here to delete it: a disabled dashboard endpoint's
}

// DeliveriesPage lists one endpoint's deliveries, newest first.
type DeliveriesPage struct {
	Meta
	EndpointID int64
	URL        string
	State      string // the filter: "", PENDING, DELIVERED or DEAD
	Order      string
	Filters    []Filter
	Rows       []DeliveryRow
	More       bool
	Redeliver  string // POST here
	Done       string
	Error      string
}

// Filter is a link that filters a list.
type Filter struct {
	Text    string
	URL     string
	Current bool
}

// DeliveryRow is one event at one endpoint.
type DeliveryRow struct {
	ID          string
	Type        string
	OrderID     int64
	Sequence    int
	OccurredAt  time.Time
	State       string
	Attempts    int
	NextAttempt time.Time
	LastAttempt time.Time
	LastStatus  int
	LastAnswer  string
}
