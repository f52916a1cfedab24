package app

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"seckill/internal/config"
	"seckill/internal/payhook"
	"seckill/internal/seckill"
)

// TestPaymentsTable holds the code to the tables of docs/payments.md (and
// docs/api.md's copy of the first): for every row it builds an order (or a
// payment) in that state, makes the column's call, and compares what the
// system answers with the words in code font of the cell.
func TestPaymentsTable(t *testing.T) {
	provider, e := newRefundEnv(t)
	v, err := e.app.Catalog.AddSeckillVoucher(asUser(e.ctx, 1, true), seckill.NewSeckillVoucher{
		ShopID: 1, Title: "table", PayValue: 250, ActualValue: 500, Stock: 1000,
		BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &tableFixtures{e: e, voucherID: v.ID, refunds: e.app.Refunds, provider: provider, nextUser: 900_000}

	for _, doc := range []string{"../../docs/payments.md", "../../docs/api.md"} {
		rows := readTable(t, doc, "| the order is |")
		t.Run(doc+"/orders", func(t *testing.T) {
			checkRows(t, rows, f.orderRows(), f.orderColumn)
		})
	}
	rows := readTable(t, "../../docs/payments.md", "| the payment is |")
	t.Run("payments", func(t *testing.T) {
		checkRows(t, rows, f.paymentRows(), f.paymentColumn)
	})
}

// table is a markdown table: its header and its rows, cells trimmed.
type table struct {
	header []string
	rows   [][]string
}

// readTable reads the table of file whose header line starts with prefix.
func readTable(t *testing.T, file, prefix string) table {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var tab table
	lines := strings.Split(string(raw), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		tab.header = cells(l)
		for _, r := range lines[i+2:] {
			if !strings.HasPrefix(r, "|") {
				break
			}
			tab.rows = append(tab.rows, cells(r))
		}
		return tab
	}
	t.Fatalf("%s: no table starting %q", file, prefix)
	return tab
}

func cells(line string) []string {
	parts := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

var codeWords = regexp.MustCompile("`([^`]+)`")

// words returns the words in code font of a cell: the answer it states.
func words(cell string) []string {
	var out []string
	for _, m := range codeWords.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// checkRows runs every cell of tab: build(row) makes a fresh fixture for
// each cell, run(column, fixture, want) makes the call and returns the
// system's answer as words.
func checkRows[F any](t *testing.T, tab table, build map[string]func(t *testing.T) F, run func(t *testing.T, col int, f F, want []string) []string) {
	t.Helper()
	var seen []string
	for _, row := range tab.rows {
		label := row[0]
		mk, ok := build[label]
		if !ok {
			t.Errorf("the table has a row %q that the test does not know", label)
			continue
		}
		seen = append(seen, label)
		for col := 1; col < len(row) && col < len(tab.header); col++ {
			want := words(row[col])
			if len(want) == 0 {
				continue // "—": no such call
			}
			t.Run(fmt.Sprintf("%s/%s", label, tab.header[col]), func(t *testing.T) {
				got := run(t, col, mk(t), want)
				if !slices.Equal(got, want) {
					t.Errorf("%s: the system answers %q, the table says %q", tab.header[col], got, want)
				}
			})
		}
	}
	for label := range build {
		if !slices.Contains(seen, label) {
			t.Errorf("the table lacks the row %q", label)
		}
	}
}

type tableFixtures struct {
	e         *testEnv
	voucherID int64
	refunds   *seckill.Refunds
	provider  *modelProvider
	nextUser  int64
	nextFail  int64
}

// orderCase is an order in a given state and who calls about it.
type orderCase struct {
	order   int64
	caller  int64            // who calls as "its buyer"
	payment *seckill.Payment // what the webhook columns are about
}

func (f *tableFixtures) user() int64 {
	f.nextUser++
	return f.nextUser
}

// queued buys a unit for a new user; the order stays QUEUED (no workers
// run in this test).
func (f *tableFixtures) queued(t *testing.T) (order, user int64) {
	t.Helper()
	user = f.user()
	res, err := f.e.app.Purchases.Purchase(asUser(f.e.ctx, user, false), f.voucherID)
	if err != nil || res.Outcome != seckill.OutcomeAccepted {
		t.Fatalf("purchase: %+v, %v", res, err)
	}
	return res.OrderID, user
}

// created buys and persists an order, and opens its payment.
func (f *tableFixtures) created(t *testing.T) orderCase {
	t.Helper()
	id, user := f.queued(t)
	adm, err := f.e.app.Admitter.Pending(f.e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.e.app.Purchases.PersistAdmissions(f.e.ctx, []seckill.Admission{*adm}); err != nil {
		t.Fatal(err)
	}
	return orderCase{order: id, caller: user, payment: f.pay(t, id, user)}
}

func (f *tableFixtures) pay(t *testing.T, order, user int64) *seckill.Payment {
	t.Helper()
	p, err := f.e.app.Life.CreatePayment(asUser(f.e.ctx, user, false), order)
	if err != nil {
		t.Fatalf("createPayment: %v", err)
	}
	return p
}

// event delivers a fresh event of the provider through the webhook.
func (f *tableFixtures) event(t *testing.T, p *seckill.Payment, typ string) int {
	t.Helper()
	status, _, err := payhook.Send(f.e.ctx, http.DefaultClient, f.e.url+"/webhooks/payments",
		[]byte(config.DevWebhookSecret), paymentEvent(p, typ))
	if err != nil {
		t.Fatal(err)
	}
	return status
}

func (f *tableFixtures) mustEvent(t *testing.T, p *seckill.Payment, typ string) {
	t.Helper()
	if status := f.event(t, p, typ); status != http.StatusOK {
		t.Fatalf("%s of %s: %d", typ, p.ID, status)
	}
}

func (f *tableFixtures) makeDue(t *testing.T, order int64) {
	t.Helper()
	if _, err := f.e.app.DB.ExecContext(f.e.ctx, `UPDATE voucher_order SET pay_by = now() - interval '1 second' WHERE id = ?`, order); err != nil {
		t.Fatal(err)
	}
}

// paidAfterFailure is a PAID order whose first payment failed: c.payment
// is the failed one, the second paid.
func (f *tableFixtures) paidAfterFailure(t *testing.T) orderCase {
	t.Helper()
	c := f.created(t)
	f.mustEvent(t, c.payment, seckill.EventPaymentFailed)
	f.mustEvent(t, f.pay(t, c.order, c.caller), seckill.EventPaymentSucceeded)
	return c
}

func (f *tableFixtures) cancelled(t *testing.T) orderCase {
	t.Helper()
	c := f.created(t)
	if _, err := f.e.app.Life.CancelOrder(asUser(f.e.ctx, c.caller, false), c.order); err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *tableFixtures) expired(t *testing.T) orderCase {
	t.Helper()
	c := f.created(t)
	f.makeDue(t, c.order)
	if closed, err := f.e.app.Life.ExpireOrder(f.e.ctx, c.order); err != nil || !closed {
		t.Fatalf("expire: %v, %v", closed, err)
	}
	return c
}

func (f *tableFixtures) orderRows() map[string]func(t *testing.T) orderCase {
	return map[string]func(t *testing.T) orderCase{
		"`QUEUED` (admitted, not in Postgres yet)": func(t *testing.T) orderCase {
			id, user := f.queued(t)
			return orderCase{order: id, caller: user}
		},
		"`CREATED`, before `payBy`": f.created,
		"`CREATED`, `payBy` passed (not expired yet)": func(t *testing.T) orderCase {
			c := f.created(t)
			f.makeDue(t, c.order)
			return c
		},
		"`PAID` (a payment that failed, then another that paid)": f.paidAfterFailure,
		"`CANCELLED`": f.cancelled,
		"`EXPIRED`":   f.expired,
		"`FAILED` (could not be persisted)": func(t *testing.T) orderCase {
			// Postgres records an admission it could never persist in
			// order_failure; this one stands for it.
			f.nextFail++
			id := seckill.OrderID(f.voucherID, 4_000_000+f.nextFail)
			user := f.user()
			_, err := f.e.app.DB.ExecContext(f.e.ctx, `INSERT INTO order_failure (id, user_id, voucher_id, admitted_at, reason)
				VALUES (?, ?, ?, now(), ?)`, id, user, f.voucherID, seckill.FailureNoStock)
			if err != nil {
				t.Fatal(err)
			}
			return orderCase{order: id, caller: user}
		},
		"another user's (any status)": func(t *testing.T) orderCase {
			c := f.created(t)
			c.caller = f.user()
			return c
		},
		"no such order": func(t *testing.T) orderCase {
			id := seckill.OrderID(f.voucherID, 4_100_000)
			return orderCase{order: id, caller: f.user(), payment: &seckill.Payment{ID: "pay_" + strings.Repeat("0", 32), Amount: 250, Currency: "CNY"}}
		},
	}
}

// orderColumn makes the call of column col about c and returns the answer
// as the table writes it.
func (f *tableFixtures) orderColumn(t *testing.T, col int, c orderCase, _ []string) []string {
	e := f.e
	switch col {
	case 1: // createPayment by its buyer
		p, err := e.app.Life.CreatePayment(asUser(e.ctx, c.caller, false), c.order)
		if err != nil {
			return []string{seckill.ErrorCode(err)}
		}
		return []string{string(p.Status)}
	case 2, 3: // cancelOrder by its buyer, an operator's cancel
		var o *seckill.Order
		var err error
		if col == 2 {
			o, err = e.app.Life.CancelOrder(asUser(e.ctx, c.caller, false), c.order)
		} else {
			o, err = e.app.Life.AdminCancelOrder(asUser(e.ctx, 1, true), c.order)
		}
		if err != nil {
			return []string{seckill.ErrorCode(err)}
		}
		return []string{string(o.Status)}
	case 4, 5: // payment.succeeded, payment.failed
		typ := seckill.EventPaymentSucceeded
		if col == 5 {
			typ = seckill.EventPaymentFailed
		}
		status := f.event(t, c.payment, typ)
		if status != http.StatusOK {
			return []string{fmt.Sprint(status)}
		}
		return []string{"200", string(f.paymentStatus(t, c.payment.ID)), string(f.orderStatus(t, c.order))}
	}
	t.Fatalf("no column %d", col)
	return nil
}

func (f *tableFixtures) paymentStatus(t *testing.T, id string) seckill.PaymentStatus {
	t.Helper()
	var st string
	if err := f.e.app.DB.NewRaw(`SELECT status FROM payment WHERE id = ?`, id).Scan(f.e.ctx, &st); err != nil {
		t.Fatal(err)
	}
	return seckill.PaymentStatus(st)
}

func (f *tableFixtures) orderStatus(t *testing.T, id int64) seckill.OrderStatus {
	t.Helper()
	o, err := f.e.app.Purchases.Order(asUser(f.e.ctx, 1, true), id)
	if err != nil {
		t.Fatal(err)
	}
	return o.Status
}

// paymentCase is a payment in a given state, with its order.
type paymentCase struct {
	order   int64
	payment *seckill.Payment
}

// owed is a payment owed back: its order was cancelled before the
// provider confirmed it.
func (f *tableFixtures) owed(t *testing.T) paymentCase {
	t.Helper()
	c := f.cancelled(t)
	f.mustEvent(t, c.payment, seckill.EventPaymentSucceeded)
	return paymentCase{order: c.order, payment: c.payment}
}

// refunding is a payment owed back whose refund was sent and not
// confirmed.
func (f *tableFixtures) refunding(t *testing.T) paymentCase {
	t.Helper()
	c := f.owed(t)
	f.provider.answer(answerPending)
	if err := f.refunds.Send(f.e.ctx, c.payment.ID, false); err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *tableFixtures) paymentRows() map[string]func(t *testing.T) paymentCase {
	of := func(c orderCase) paymentCase { return paymentCase{order: c.order, payment: c.payment} }
	return map[string]func(t *testing.T) paymentCase{
		"`PENDING` (its order `CREATED`)": func(t *testing.T) paymentCase { return of(f.created(t)) },
		"`FAILED`, its order still `CREATED`": func(t *testing.T) paymentCase {
			c := f.created(t)
			f.mustEvent(t, c.payment, seckill.EventPaymentFailed)
			return of(c)
		},
		"`FAILED`, its order paid by another payment":       func(t *testing.T) paymentCase { return of(f.paidAfterFailure(t)) },
		"`CANCELLED` (its order closed or paid by another)": func(t *testing.T) paymentCase { return of(f.cancelled(t)) },
		"`SUCCEEDED` (it paid its order)": func(t *testing.T) paymentCase {
			c := f.created(t)
			f.mustEvent(t, c.payment, seckill.EventPaymentSucceeded)
			return of(c)
		},
		"`REFUND_NEEDED`":                   f.owed,
		"`REFUNDING` (sent, not confirmed)": f.refunding,
		"`REFUNDED`": func(t *testing.T) paymentCase {
			c := f.refunding(t)
			f.mustEvent(t, c.payment, seckill.EventRefundSucceeded)
			return c
		},
		"`REFUND_FAILED`": func(t *testing.T) paymentCase {
			c := f.refunding(t)
			f.mustEvent(t, c.payment, seckill.EventRefundFailed)
			return c
		},
	}
}

// paymentColumn delivers column col's event and answers the payment's
// status afterwards, and its order's where the cell names one.
func (f *tableFixtures) paymentColumn(t *testing.T, col int, c paymentCase, want []string) []string {
	typ := []string{"", seckill.EventPaymentSucceeded, seckill.EventPaymentFailed, seckill.EventRefundSucceeded, seckill.EventRefundFailed}[col]
	if status := f.event(t, c.payment, typ); status != http.StatusOK {
		return []string{fmt.Sprint(status)}
	}
	got := []string{string(f.paymentStatus(t, c.payment.ID))}
	if len(want) > 1 {
		got = append(got, string(f.orderStatus(t, c.order)))
	}
	return got
}
