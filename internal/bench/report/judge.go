package report

import (
	"fmt"
	"strings"
)

// Judge sets the verdict: oversell, lost and duplicate orders fail a run;
// unanswered requests and unsold units are noted.
func (r *Report) Judge() {
	var fails, notes []string
	if over := r.Accepted - r.Stock; over > 0 {
		fails = append(fails, fmt.Sprintf("OVERSOLD: %s accepted for %s units", Number(r.Accepted), Number(r.Stock)))
	}
	if r.DuplicateAnswers > 0 {
		fails = append(fails, fmt.Sprintf("DUPLICATE: %s order ids or buyers accepted twice", Number(r.DuplicateAnswers)))
	}
	if p := r.Persistence; p != nil {
		if p.Source != SourceRedis && p.Rows > r.Stock {
			fails = append(fails, fmt.Sprintf("OVERSOLD: %s rows for %s units", Number(p.Rows), Number(r.Stock)))
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
	if n := r.Failed + r.Dropped; n > 0 {
		notes = append(notes, fmt.Sprintf("%s requests unanswered", Number(n)))
	}
	if r.Accepted < r.Stock && r.Outcomes["SOLD_OUT"] > 0 {
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
