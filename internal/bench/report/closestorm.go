package report

import (
	"fmt"
	"strings"
	"time"

	"seckill/internal/seckill"
)

// The kinds of a CloseStorm, and the units its CPU is divided by.
const (
	CloseCancel  = "cancel"  // the buyers cancel through GraphQL's cancelOrder
	ClosePayment = "payment" // the provider confirms every payment through the signed webhook

	UnitCancelled = "cancelled" // orders CANCELLED (the cancel storm)
	UnitPaid      = "paid"      // orders PAID (the payment storm)
)

// CloseStorm is what --cancel-storm or --payment-storm measured: a
// campaign of Units sold, then every order closed at once by its buyer
// (cancelled) or by the payment provider (paid), and a second campaign's
// sale alone and during the storm.
type CloseStorm struct {
	Kind      string `json:"kind"` // CloseCancel or ClosePayment
	Units     int64  `json:"units"`
	VoucherID int64  `json:"voucher_id"`
	// Sale is the campaign's sale; Alone and During the second campaign's
	// (ProbeVoucherID) before the storm and while it runs.
	SaleLoad       LoadInfo `json:"sale_load"`
	Sale           *Report  `json:"sale"`
	ProbeVoucherID int64    `json:"probe_voucher_id"`
	ProbeLoad      LoadInfo `json:"probe_load"`
	Alone          *Report  `json:"alone"`
	During         *Report  `json:"during,omitempty"`

	// Opened is the payments the buyers opened before a payment storm
	// (createPayment), and how long that took.
	Opened   int64   `json:"payments_opened,omitempty"`
	OpenedS  float64 `json:"payments_opened_in_s,omitempty"`
	Requests Closes  `json:"requests"`
	// Statuses is the campaign's orders by status once the storm is over;
	// Succeeded its SUCCEEDED payments, and the orders they belong to.
	Statuses        map[seckill.OrderStatus]int64 `json:"statuses"`
	Succeeded       int64                         `json:"succeeded_payments"`
	SucceededOrders int64                         `json:"orders_with_a_succeeded_payment"`
	// Books is the campaign's stock equation once the storm is over.
	Books        *Books       `json:"books,omitempty"`
	Pool         PoolUse      `json:"postgres_pool"`
	Interference Interference `json:"interference"`
	// CPU is each process's CPU over the storm, the second sale's load
	// aside, per order closed in it (UnitCancelled or UnitPaid).
	CPU *CPU `json:"cpu,omitempty"`

	Notes   []string `json:"notes,omitempty"`
	OK      bool     `json:"ok"`
	Verdict string   `json:"verdict"`
}

// Closes is the requests of a storm that closed the orders: one per order,
// sent by Callers at once, each waiting for its answer.
type Closes struct {
	Callers   int       `json:"callers"`
	Planned   int64     `json:"planned"`
	Sent      int64     `json:"sent"`
	OK        int64     `json:"ok"` // answered with the order closed as asked
	Errors    int64     `json:"errors"`
	ErrorText string    `json:"first_error,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// DurationS runs from the first request sent to the last answer; PerS
	// is OK over it, PeakPerS the most answers in one second.
	DurationS float64 `json:"duration_s"`
	PerS      float64 `json:"closed_per_s"`
	PeakPerS  int64   `json:"busiest_second"`
	Latency   Latency `json:"latency_ms"`
}

// Unit is the CPU unit of the storm's kind.
func (s *CloseStorm) Unit() string {
	if s.Kind == CloseCancel {
		return UnitCancelled
	}
	return UnitPaid
}

// want is the status every order of the campaign must end in.
func (s *CloseStorm) want() seckill.OrderStatus {
	if s.Kind == CloseCancel {
		return seckill.OrderCancelled
	}
	return seckill.OrderPaid
}

// Relate fills the interference from the two sales of the second campaign.
func (s *CloseStorm) Relate() {
	s.Interference = interference(s.Alone, s.During, s.Interference.Overlap)
}

// Judge sets the storm's verdict: the sales', every request answered with
// its order closed, every order of the campaign in the status asked (paid
// once, for a payment storm), and the books balanced with the units where
// they belong: back on sale after cancellations, sold after payments. The
// interference is reported, not judged.
func (s *CloseStorm) Judge(interrupted bool) {
	var fails []string
	for _, r := range []*Report{s.Alone, s.Sale, s.During} {
		if r != nil && !r.OK {
			fails = append(fails, r.Target+": "+r.Verdict)
		}
	}
	q, want := s.Requests, s.want()
	whole := !interrupted && s.Sale != nil && q.Sent == q.Planned
	if q.Errors > 0 {
		fails = append(fails, fmt.Sprintf("ERRORS: %s of %s requests failed (%s)", Number(q.Errors), Number(q.Sent), q.ErrorText))
	}
	if whole && q.Sent < s.Sale.Accepted {
		fails = append(fails, fmt.Sprintf("NOT SENT: %s of %s orders", Number(q.Sent), Number(s.Sale.Accepted)))
	}
	if !interrupted && s.Sale != nil && q.Sent < q.Planned {
		fails = append(fails, fmt.Sprintf("NOT CLOSED: %s of %s orders asked before the timeout", Number(q.Sent), Number(q.Planned)))
	}
	if whole {
		if n := s.Statuses[want]; n != s.Sale.Accepted {
			fails = append(fails, fmt.Sprintf("STATUS: %s of %s orders are %s (%s)", Number(n), Number(s.Sale.Accepted), want, s.statusText()))
		}
		if s.Kind == CloseCancel && s.Succeeded != 0 {
			fails = append(fails, fmt.Sprintf("PAID: %s payments succeeded in a storm of cancellations", Number(s.Succeeded)))
		}
		if s.Kind == ClosePayment && (s.Succeeded != s.Sale.Accepted || s.SucceededOrders != s.Sale.Accepted) {
			fails = append(fails, fmt.Sprintf("PAYMENTS: %s succeeded for %s orders, want one for each of %s",
				Number(s.Succeeded), Number(s.SucceededOrders), Number(s.Sale.Accepted)))
		}
		if b := s.Books; b != nil {
			switch {
			case !b.Balanced:
				fails = append(fails, fmt.Sprintf("BOOKS: initial %s ≠ remaining %s + queued %s + awaiting payment %s + paid %s after the storm",
					Number(b.Initial), Number(b.Remaining), Number(b.Queued), Number(b.Awaiting), Number(b.Paid)))
			case s.Kind == CloseCancel && b.Remaining != b.Initial:
				fails = append(fails, fmt.Sprintf("BOOKS: %s of %s units back on sale after every order was cancelled", Number(b.Remaining), Number(b.Initial)))
			case s.Kind == ClosePayment && b.Paid != s.Sale.Accepted:
				fails = append(fails, fmt.Sprintf("BOOKS: %s units paid of %s sold", Number(b.Paid), Number(s.Sale.Accepted)))
			}
		}
	}
	s.OK = len(fails) == 0
	switch {
	case !s.OK:
		s.Verdict = "FAIL: " + strings.Join(fails, "; ")
	case s.Sale == nil:
		s.Verdict = "OK so far: interrupted before the sale"
	default:
		s.Verdict = fmt.Sprintf("OK: %s sold, %s %s", Number(s.Sale.Accepted), Number(s.Statuses[want]), strings.ToLower(string(want)))
		if whole && s.Books != nil {
			if s.Kind == CloseCancel {
				s.Verdict += ", every unit back on sale (books balance)"
			} else {
				s.Verdict += ", each paid once (books balance)"
			}
		}
	}
}

// statusText lists the campaign's orders by status.
func (s *CloseStorm) statusText() string {
	var parts []string
	for _, st := range seckill.OrderStatuses {
		if n := s.Statuses[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", st, Number(n)))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// write writes the storm for people: the three sales side by side, then
// the requests, what became of the orders, the pool, the CPU per order
// closed and the interference.
func (s *CloseStorm) write(b *strings.Builder) {
	how := "then cancel them (GraphQL cancelOrder)"
	if s.Kind == ClosePayment {
		how = "open their payments (createPayment), then the provider confirms them all (the signed webhook, payment.succeeded)"
	}
	fmt.Fprintf(b, "seckill-bench --%s-storm %s: campaign %d of %s units sold to buyers who %s, %d at once "+
		"(the sale: %s); campaign %d sold alone before and again during the storm (%s)\n\n",
		s.Kind, Number(s.Units), s.VoucherID, Number(s.Units), how, s.Requests.Callers,
		strings.TrimPrefix(loadHeadline(s.SaleLoad), "seckill-bench: "),
		s.ProbeVoucherID, strings.TrimPrefix(loadHeadline(s.ProbeLoad), "seckill-bench: "))
	var runs []*Report
	for _, r := range []*Report{s.Alone, s.Sale, s.During} {
		if r != nil {
			runs = append(runs, r)
		}
	}
	writeRunTable(b, "", runs)
	b.WriteString("\n")
	writeVerdicts(b, runs)
	b.WriteString("\n")

	if s.Kind == ClosePayment {
		fmt.Fprintf(b, "payments opened before the storm: %s in %s\n", Number(s.Opened), Seconds(s.OpenedS))
	}
	q := s.Requests
	what := map[string]string{CloseCancel: "cancels", ClosePayment: "payments"}[s.Kind]
	if q.Sent > 0 {
		l := q.Latency
		fmt.Fprintf(b, "%s: %s of %s closed their order in %s: %s %s/s, %s in the busiest second; latency p50 %s, p99 %s, max %s; %s errors\n",
			what, Number(q.OK), Number(q.Sent), Seconds(q.DurationS), Number(int64(q.PerS+0.5)), what, Number(q.PeakPerS),
			Millis(l.P50), Millis(l.P99), Millis(l.Max), Number(q.Errors))
	} else {
		fmt.Fprintf(b, "%s: none sent\n", what)
	}
	fmt.Fprintf(b, "orders of campaign %d afterwards: %s; %s payments succeeded", s.VoucherID, s.statusText(), Number(s.Succeeded))
	if bk := s.Books; bk != nil {
		fmt.Fprintf(b, "; books: initial %s = remaining %s + queued %s + awaiting payment %s + paid %s",
			Number(bk.Initial), Number(bk.Remaining), Number(bk.Queued), Number(bk.Awaiting), Number(bk.Paid))
	}
	b.WriteString("\n")
	writePool(b, s.Pool, "the storm")
	writeCPUPer(b, s.CPU, s.Unit(), strings.ToLower(string(s.want()))+" order over the storm")
	b.WriteString(s.Interference.Text + "\n")
	for _, n := range s.Notes {
		b.WriteString("note: " + n + "\n")
	}
	fmt.Fprintf(b, "verdict %s storm: %s\n", s.Kind, s.Verdict)
	writeCPUNote(b, runs)
}
