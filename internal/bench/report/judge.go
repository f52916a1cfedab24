package report

import (
	"fmt"
	"slices"
	"strings"

	"seckill/internal/seckill"
)

// Judge sets the verdict: oversell, lost and duplicate orders fail a run;
// unanswered requests and unsold units are noted.
func (r *Report) Judge() {
	var fails, notes []string
	var pay *Payments
	if r.Persistence != nil {
		pay = r.Persistence.Payments
	}
	// With payments, a unit given back by an expired or cancelled order
	// may be sold again: what must not exceed the stock is the orders that
	// hold a unit.
	returned := int64(0)
	if pay != nil {
		returned = pay.Expired + pay.Cancelled
	}
	if over := r.Accepted - r.Stock - returned; over > 0 {
		fails = append(fails, fmt.Sprintf("OVERSOLD: %s accepted for %s units", Number(r.Accepted), Number(r.Stock)))
	}
	if r.DuplicateAnswers > 0 {
		fails = append(fails, fmt.Sprintf("DUPLICATE: %s order ids or buyers accepted twice", Number(r.DuplicateAnswers)))
	}
	if p := r.Persistence; p != nil {
		if p.Source != SourceRedis && pay == nil && p.Rows > r.Stock {
			fails = append(fails, fmt.Sprintf("OVERSOLD: %s rows for %s units", Number(p.Rows), Number(r.Stock)))
		}
		if pay != nil {
			fails, notes = pay.judge(fails, notes, r.Interrupted)
		}
		if p.PostgresStock != nil && *p.PostgresStock < 0 {
			fails = append(fails, fmt.Sprintf("OVERSOLD: Postgres stock is %d", *p.PostgresStock))
		}
		if p.RedisRemaining != nil && *p.RedisRemaining < 0 {
			fails = append(fails, fmt.Sprintf("OVERSOLD: Redis remaining is %d", *p.RedisRemaining))
		}
		if p.Lost > 0 && !p.Complete && r.Interrupted {
			notes = append(notes, fmt.Sprintf("%s accepted orders not persisted yet when interrupted", Number(p.Lost)))
		} else if p.Lost > 0 {
			if p.Complete {
				fails = append(fails, fmt.Sprintf("LOST: %s accepted orders are not in %s", Number(p.Lost), p.Source))
			} else {
				fails = append(fails, fmt.Sprintf("NOT PERSISTED: %s accepted orders still missing after %.1f s", Number(p.Lost), p.WaitedS))
			}
		}
		if n := p.DuplicateUsers + p.DuplicateIDs; n > 0 {
			fails = append(fails, fmt.Sprintf("DUPLICATE: %s rows beyond one per buyer or order id", Number(n)))
		}
		// An order accepted for a request whose answer was lost to a
		// timeout is a row nobody saw accepted; more such rows than failed
		// requests cannot be explained.
		if p.Unexpected > r.Failed {
			fails = append(fails, fmt.Sprintf("UNEXPECTED: %s rows that no answer accepted", Number(p.Unexpected)))
		} else if p.Unexpected > 0 {
			notes = append(notes, fmt.Sprintf("%s rows belong to requests whose answer was lost", Number(p.Unexpected)))
		}
		if p.FailedOrders > 0 {
			notes = append(notes, fmt.Sprintf("%s accepted orders FAILED in persistence", Number(p.FailedOrders)))
		}
	}
	// --compare limit measures what the check costs a purchase that passes
	// it: a refusal on either side means the limits were not as set (the
	// bench's rates are meant never to refuse its load), and the ratio
	// prices something else. --compare base runs both builds with those
	// limits on, for the same reason.
	if n := r.Outcomes["RATE_LIMITED"]; n > 0 && slices.Contains([]string{TargetLimit, TargetNoLimit, TargetBase, TargetHead}, r.Target) {
		fails = append(fails, fmt.Sprintf("RATE_LIMITED: %s purchases refused by the shared limit, which this comparison sets never to refuse: the measurement is wrong", Number(n)))
	}
	if r.Room != nil {
		fails, notes = r.Room.judge(fails, notes, r.Accepted, r.Stock, r.Interrupted)
	}
	if n := r.Failed + r.Dropped; n > 0 {
		notes = append(notes, fmt.Sprintf("%s requests unanswered", Number(n)))
	}
	if r.Accepted < r.Stock && r.Outcomes["SOLD_OUT"] > 0 && r.Room == nil {
		notes = append(notes, fmt.Sprintf("%s units unsold although SOLD_OUT was answered", Number(r.Stock-r.Accepted)))
	}
	if r.Interrupted {
		notes = append(notes, "interrupted")
	}
	r.OK = len(fails) == 0
	var b strings.Builder
	if r.OK {
		b.WriteString("OK: ")
		fmt.Fprintf(&b, "%s accepted of %s units", Number(r.Accepted), Number(r.Stock))
		if p := r.Persistence; p != nil && p.Source != SourceRedis {
			fmt.Fprintf(&b, ", %s rows", Number(p.Rows))
		}
		if pay != nil {
			fmt.Fprintf(&b, ", %s paid, %s expired, %s resold; books balance", Number(pay.Paid), Number(pay.Expired), Number(pay.Resold))
		}
		if p := r.Persistence; p != nil && p.Source == SourceRedis {
			// The ceiling persists nothing: its books are Redis's.
			b.WriteString(", all pending in Redis (nothing persisted); no oversell, no duplicate admissions")
		} else {
			b.WriteString("; no oversell, no lost, no duplicate orders")
		}
	} else {
		b.WriteString("FAIL: ")
		b.WriteString(strings.Join(fails, "; "))
	}
	if len(notes) > 0 {
		b.WriteString(" (" + strings.Join(notes, "; ") + ")")
	}
	r.Verdict = b.String()
}

// judge adds the verdicts on payments: the campaign's books balance, no
// unit is held twice, every accepted order has a status, and exactly the
// confirmed payments made orders PAID.
func (pay *Payments) judge(fails, notes []string, interrupted bool) ([]string, []string) {
	bk := pay.Books
	bal := bk.Balance()
	// Never oversell, named on its own: the equation below fails too, but
	// this says which guarantee broke.
	if live := bal.Totals.Holding(); live > bk.Initial {
		fails = append(fails, fmt.Sprintf("OVERSOLD: %s orders awaiting payment or paid for %s units", Number(live), Number(bk.Initial)))
	}
	if bal.Skew != 0 {
		fails = append(fails, fmt.Sprintf("BOOKS: Postgres's stock says %s units are taken, its orders %s awaiting payment + %s paid",
			Number(bk.Taken), Number(bk.Awaiting), Number(bk.Paid)))
	}
	if !bk.Known {
		notes = append(notes, "Redis does not hold the campaign: its books were checked in Postgres only")
	}
	if bal.Diff != 0 {
		// Settling too: the verifier read again until --persist-timeout,
		// and a persist still in flight then is an admission that stays
		// pending in Redis though Postgres holds its order.
		still := ""
		if bal.State == seckill.BalanceSettling {
			still = fmt.Sprintf(" (still settling: %s orders count as queued and persisted)", Number(bal.Diff))
		}
		fails = append(fails, fmt.Sprintf("BOOKS: initial %s ≠ remaining %s + queued %s + awaiting payment %s + paid %s%s",
			Number(bk.Initial), Number(bk.Remaining), Number(bk.Queued), Number(bk.Awaiting), Number(bk.Paid), still))
	}
	if bk.DuplicateBuyers > 0 {
		fails = append(fails, fmt.Sprintf("DUPLICATE: %s buyers hold two live orders", Number(bk.DuplicateBuyers)))
	}
	if pay.Unaccounted > 0 {
		fails = append(fails, fmt.Sprintf("LOST: %s accepted orders are neither awaiting payment nor in a final status", Number(pay.Unaccounted)))
	}
	if pay.ConfirmedUnpaid > 0 {
		fails = append(fails, fmt.Sprintf("LOST PAYMENT: %s confirmed payments whose order is not PAID", Number(pay.ConfirmedUnpaid)))
	}
	// A webhook call whose answer was lost (a timeout, an interrupt) may
	// still have paid its order: no more such orders than such calls.
	switch {
	case pay.PaidUnconfirmed > pay.Errors && !interrupted:
		fails = append(fails, fmt.Sprintf("UNPAID: %s orders PAID without a confirmed payment", Number(pay.PaidUnconfirmed)))
	case pay.PaidUnconfirmed > 0:
		notes = append(notes, fmt.Sprintf("%s orders PAID by webhook calls whose answer was lost", Number(pay.PaidUnconfirmed)))
	}
	if pay.Late > 0 {
		notes = append(notes, fmt.Sprintf("%s payments arrived after their order closed (refund needed)", Number(pay.Late)))
	}
	if pay.Errors > 0 {
		notes = append(notes, fmt.Sprintf("%s payment calls failed, e.g. %s", Number(pay.Errors), pay.ErrorExample))
	}
	return fails, notes
}
