package store_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/pgdriver"

	"seckill/internal/seckill"
	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

func TestOpen(t *testing.T) {
	t.Run("pool", func(t *testing.T) {
		db, err := store.Open(t.Context(), storetest.NewDSN(t), 7)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if got := db.Stats().MaxOpenConnections; got != 7 {
			t.Errorf("MaxOpenConnections = %d, want 7", got)
		}
	})
	for _, tt := range []struct {
		name, dsn string
		maxConns  int
		want      string
	}{
		{"unreachable", "postgres://u:hunter2@127.0.0.1:1/db?sslmode=disable&dial_timeout=1", 2,
			`store: cannot reach postgres at 127.0.0.1:1 (database "db", user "u")`},
		{"bad scheme", "mysql://u:hunter2@127.0.0.1/db", 2, "store: invalid database URL"},
		{"bad option", "postgres://u:hunter2@127.0.0.1/db?sslmode=sometimes", 2, "store: invalid database URL"},
		{"no conns", "postgres://u@127.0.0.1/db", 0, "store: maxConns must be at least 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, err := store.Open(t.Context(), tt.dsn, tt.maxConns)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("err = %q reveals the password", err)
			}
		})
	}
}

// newStore returns a Store on a fresh migrated database, and the database.
func newStore(t *testing.T) (*bun.DB, *store.Store) {
	t.Helper()
	db := storetest.NewDB(t)
	return db, store.New(db)
}

// now is a time Postgres stores exactly (microseconds, UTC).
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func newVoucher(title string, stock int64, begin, end time.Time) *seckill.Voucher {
	return &seckill.Voucher{
		ShopID: 7, Title: title, SubTitle: "sub " + title, Rules: "one per user",
		PayValue: 500, ActualValue: 2000, Type: seckill.VoucherSeckill,
		Campaign: &seckill.Campaign{InitialStock: stock, Stock: stock, BeginTime: begin, EndTime: end},
	}
}

func TestVouchers(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	begin, end := now().Add(time.Minute), now().Add(time.Hour)

	var all []*seckill.Voucher
	for i, title := range []string{"a", "b", "c", "d", "e"} {
		v := newVoucher(title, int64(10+i), begin, end)
		if i == 2 {
			v.Type, v.Campaign = seckill.VoucherNormal, nil
		}
		if err := s.CreateVoucher(ctx, v); err != nil {
			t.Fatal(err)
		}
		if v.ID == 0 || v.CreatedAt.IsZero() {
			t.Fatalf("CreateVoucher left ID %d, CreatedAt %v", v.ID, v.CreatedAt)
		}
		if v.Campaign != nil && (v.Campaign.VoucherID != v.ID || v.Campaign.CreatedAt.IsZero()) {
			t.Fatalf("CreateVoucher left campaign %+v for voucher %d", v.Campaign, v.ID)
		}
		all = append(all, v)
	}

	for _, want := range all {
		got, err := s.Voucher(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Voucher(%d) (-want +got):\n%s", want.ID, diff)
		}
	}

	for _, tt := range []struct {
		name   string
		filter seckill.VoucherFilter
		want   []*seckill.Voucher
	}{
		{"default page", seckill.VoucherFilter{}, all},
		{"first page", seckill.VoucherFilter{First: 2}, all[:2]},
		{"second page", seckill.VoucherFilter{First: 2, After: all[1].ID}, all[2:4]},
		{"last page", seckill.VoucherFilter{First: 2, After: all[3].ID}, all[4:]},
		{"past the end", seckill.VoucherFilter{First: 2, After: all[4].ID}, []*seckill.Voucher{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Vouchers(ctx, tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Vouchers(%+v) (-want +got):\n%s", tt.filter, diff)
			}
		})
	}

	t.Run("not found", func(t *testing.T) {
		_, err := s.Voucher(ctx, all[4].ID+1000)
		if code := seckill.ErrorCode(err); code != seckill.ENOTFOUND {
			t.Errorf("code = %q (err %v), want %q", code, err, seckill.ENOTFOUND)
		}
	})

	t.Run("default page size", func(t *testing.T) {
		for i := range seckill.DefaultPageSize {
			storetest.CreateCampaign(t, db, int64(i+1))
		}
		got, err := s.Vouchers(ctx, seckill.VoucherFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != seckill.DefaultPageSize {
			t.Errorf("got %d vouchers, want %d", len(got), seckill.DefaultPageSize)
		}
	})
}

func TestCreateVoucherRejected(t *testing.T) {
	s := store.New(storetest.NewDB(t))
	begin, end := now(), now().Add(time.Hour)
	for _, tt := range []struct {
		name   string
		change func(v *seckill.Voucher)
		rule   string
	}{
		{"end before begin", func(v *seckill.Voucher) { v.Campaign.EndTime = begin.Add(-time.Second) }, "seckill_campaign_window_check"},
		{"end at begin", func(v *seckill.Voucher) { v.Campaign.EndTime = begin }, "seckill_campaign_window_check"},
		{"negative stock", func(v *seckill.Voucher) { v.Campaign.Stock = -1 }, "seckill_campaign_stock_check"},
		{"stock above initial", func(v *seckill.Voucher) { v.Campaign.Stock = v.Campaign.InitialStock + 1 }, "seckill_campaign_stock_initial_check"},
		{"no initial stock", func(v *seckill.Voucher) { v.Campaign.InitialStock, v.Campaign.Stock = 0, 0 }, "seckill_campaign_initial_stock_check"},
		{"worth less than paid", func(v *seckill.Voucher) { v.ActualValue = v.PayValue - 1 }, "voucher_actual_value_check"},
		{"empty title", func(v *seckill.Voucher) { v.Title = "" }, "voucher_title_check"},
		{"long title", func(v *seckill.Voucher) { v.Title = strings.Repeat("é", 256) }, "voucher_title_check"},
		{"no shop", func(v *seckill.Voucher) { v.ShopID = 0 }, "voucher_shop_id_check"},
		{"unknown type", func(v *seckill.Voucher) { v.Type = "GIFT" }, "voucher_type_check"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newVoucher("x", 10, begin, end)
			tt.change(v)
			err := s.CreateVoucher(t.Context(), v)
			if code := seckill.ErrorCode(err); code != seckill.EINVALID {
				t.Fatalf("code = %q (err %v), want %q", code, err, seckill.EINVALID)
			}
			if msg := seckill.ErrorMessage(err); !strings.Contains(msg, tt.rule) {
				t.Errorf("message %q does not name %s", msg, tt.rule)
			}
			if v.ID != 0 {
				t.Errorf("a rejected voucher got id %d", v.ID)
			}
		})
	}
	// Nothing of the rejected vouchers stayed behind.
	vs, err := s.Vouchers(t.Context(), seckill.VoucherFilter{First: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 0 {
		t.Errorf("%d vouchers stayed behind", len(vs))
	}
}

// sqlState returns the SQLSTATE of a statement's error, or "" on success.
func sqlState(t *testing.T, db bun.IDB, query string, args ...any) string {
	t.Helper()
	_, err := db.ExecContext(t.Context(), query, args...)
	if err == nil {
		return ""
	}
	var pgErr pgdriver.Error
	if !errors.As(err, &pgErr) {
		t.Fatalf("%s: %v", query, err)
	}
	return pgErr.Field('C')
}

// The schema itself rejects bad rows, whatever writes them.
func TestConstraints(t *testing.T) {
	db := storetest.NewDB(t)
	v := storetest.CreateCampaign(t, db, 10)
	if _, err := db.ExecContext(t.Context(), "INSERT INTO voucher_order (id, user_id, voucher_id, admitted_at) VALUES (?, 1, ?, now())",
		seckill.OrderID(v.ID, 1), v.ID); err != nil {
		t.Fatal(err)
	}
	const campaign = `INSERT INTO seckill_campaign (voucher_id, initial_stock, stock, begin_time, end_time) VALUES (?, ?, ?, ?, ?)`
	normal := func() int64 {
		var id int64
		err := db.QueryRowContext(t.Context(), `INSERT INTO voucher (shop_id, title, pay_value, actual_value, type)
			VALUES (1, 'n', 0, 0, 'NORMAL') RETURNING id`).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	begin := now()
	for _, tt := range []struct {
		name  string
		query string
		args  []any
		want  string
	}{
		{"campaign ok", campaign, []any{normal(), 5, 5, begin, begin.Add(time.Second)}, ""},
		{"end equals begin", campaign, []any{normal(), 5, 5, begin, begin}, "23514"},
		{"end before begin", campaign, []any{normal(), 5, 5, begin, begin.Add(-time.Second)}, "23514"},
		{"negative stock", campaign, []any{normal(), 5, -1, begin, begin.Add(time.Hour)}, "23514"},
		{"stock above initial", campaign, []any{normal(), 5, 6, begin, begin.Add(time.Hour)}, "23514"},
		{"second campaign", campaign, []any{v.ID, 5, 5, begin, begin.Add(time.Hour)}, "23505"},
		{"campaign without voucher", campaign, []any{v.ID + 1000, 5, 5, begin, begin.Add(time.Hour)}, "23503"},
		{"stock below zero", "UPDATE seckill_campaign SET stock = stock - 11 WHERE voucher_id = ?", []any{v.ID}, "23514"},
		{"second order of a user", "INSERT INTO voucher_order (id, user_id, voucher_id, admitted_at) VALUES (?, 1, ?, now())",
			[]any{seckill.OrderID(v.ID, 2), v.ID}, "23505"},
		{"same order id", "INSERT INTO voucher_order (id, user_id, voucher_id, admitted_at) VALUES (?, 2, ?, now())",
			[]any{seckill.OrderID(v.ID, 1), v.ID}, "23505"},
		{"order of no voucher", "INSERT INTO voucher_order (id, user_id, voucher_id, admitted_at) VALUES (?, 2, ?, now())",
			[]any{seckill.OrderID(v.ID+1000, 1), v.ID + 1000}, "23503"},
		{"orders of a voucher and of none", `INSERT INTO voucher_order (id, user_id, voucher_id, admitted_at)
			VALUES (?, 5, ?, now()), (?, 6, ?, now())`,
			[]any{seckill.OrderID(v.ID, 5), v.ID, seckill.OrderID(v.ID+1000, 2), v.ID + 1000}, "23503"},
		{"order moved to another voucher", "UPDATE voucher_order SET voucher_id = ? WHERE voucher_id = ?",
			[]any{normal(), v.ID}, "23503"},
		{"voucher of an order deleted", "DELETE FROM voucher WHERE id = ?", []any{v.ID}, "23503"},
		{"voucher of an order renumbered", "UPDATE voucher SET id = ? WHERE id = ?", []any{v.ID + 2000, v.ID}, "23503"},
		{"order status", "INSERT INTO voucher_order (id, user_id, voucher_id, status, admitted_at) VALUES (?, 3, ?, 'FAILED', now())",
			[]any{seckill.OrderID(v.ID, 3), v.ID}, "23514"},
		{"order without user", "INSERT INTO voucher_order (id, user_id, voucher_id, admitted_at) VALUES (?, 0, ?, now())",
			[]any{seckill.OrderID(v.ID, 4), v.ID}, "23514"},
		{"failure of no voucher", "INSERT INTO order_failure (id, user_id, voucher_id, reason, admitted_at) VALUES (?, 1, ?, 'r', now())",
			[]any{seckill.OrderID(v.ID+1000, 1), v.ID + 1000}, "23503"},
		{"failure without reason", "INSERT INTO order_failure (id, user_id, voucher_id, reason, admitted_at) VALUES (?, 1, ?, '', now())",
			[]any{seckill.OrderID(v.ID, 9), v.ID}, "23514"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := sqlState(t, db, tt.query, tt.args...); got != tt.want {
				t.Errorf("SQLSTATE = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDeleteVoucherWhilePersisting: a voucher is deleted only while no
// order refers to it, however its deletion and its orders' persistence
// interleave. Persisting locks the voucher's row once per statement (the
// voucher_order_voucher_check trigger); without that lock a delete whose
// check ran while a batch held the campaign row deletes the voucher under
// the batch's orders.
func TestDeleteVoucherWhilePersisting(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()
	deleted, kept := 0, 0
	for round := range 40 {
		v := storetest.CreateCampaign(t, db, 100)
		batch := make([]seckill.Admission, 50)
		for i := range batch {
			batch[i] = adm(v.ID, int64(i+1), int64(i+1))
		}
		var wg sync.WaitGroup
		var outs []seckill.PersistOutcome
		var perr, derr error
		wg.Go(func() { outs, perr = s.PersistOrders(ctx, batch) })
		wg.Go(func() {
			time.Sleep(time.Duration(round%8) * 300 * time.Microsecond)
			derr = s.DeleteVoucher(ctx, v.ID)
		})
		wg.Wait()
		if perr != nil {
			t.Fatalf("round %d: persist: %v", round, perr)
		}
		var orders int
		if err := db.NewSelect().Table("voucher_order").ColumnExpr("count(*)").Where("voucher_id = ?", v.ID).Scan(ctx, &orders); err != nil {
			t.Fatal(err)
		}
		switch seckill.ErrorCode(derr) {
		case "":
			deleted++
			if orders != 0 {
				t.Errorf("round %d: voucher deleted under %d orders", round, orders)
			}
			for _, o := range outs {
				if o.Status != seckill.OrderFailed || o.Reason != seckill.FailureNoCampaign {
					t.Errorf("round %d: order %d of a deleted voucher: %s %q", round, o.Admission.OrderID, o.Status, o.Reason)
					break
				}
			}
		case seckill.ECONFLICT:
			kept++
			if orders != len(batch) {
				t.Errorf("round %d: delete refused, %d orders of %d", round, orders, len(batch))
			}
		default:
			t.Fatalf("round %d: delete: %v", round, derr)
		}
	}
	var orphans int
	if err := db.NewRaw(`SELECT count(*) FROM voucher_order AS o
		WHERE NOT EXISTS (SELECT 1 FROM voucher AS v WHERE v.id = o.voucher_id)`).Scan(ctx, &orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d orders of no voucher", orphans)
	}
	t.Logf("deleted first %d times, refused %d times", deleted, kept)
}

func TestDeleteVoucher(t *testing.T) {
	db, s := newStore(t)
	ctx := t.Context()

	clean := storetest.CreateCampaign(t, db, 5)
	withOrder := storetest.CreateCampaign(t, db, 5)
	withFailure := storetest.CreateCampaign(t, db, 1)
	if _, err := s.PersistOrders(ctx, []seckill.Admission{
		adm(withOrder.ID, 1, 1),
		adm(withFailure.ID, 1, 1), adm(withFailure.ID, 2, 2), // the second finds no stock
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM voucher_order WHERE voucher_id = ?", withFailure.ID); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name string
		id   int64
		want string
	}{
		{"clean", clean.ID, ""},
		{"deleted before", clean.ID, seckill.ENOTFOUND},
		{"missing", clean.ID + 1000, seckill.ENOTFOUND},
		{"with an order", withOrder.ID, seckill.ECONFLICT},
		{"with a failure", withFailure.ID, seckill.ECONFLICT},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := s.DeleteVoucher(ctx, tt.id)
			if code := seckill.ErrorCode(err); code != tt.want {
				t.Fatalf("code = %q (err %v), want %q", code, err, tt.want)
			}
			_, err = s.Voucher(ctx, tt.id)
			gone := seckill.ErrorCode(err) == seckill.ENOTFOUND
			if gone != (tt.want != seckill.ECONFLICT) {
				t.Errorf("after DeleteVoucher: Voucher err = %v", err)
			}
		})
	}
	var campaigns int
	if err := db.NewSelect().Table("seckill_campaign").ColumnExpr("count(*)").Where("voucher_id = ?", clean.ID).Scan(ctx, &campaigns); err != nil {
		t.Fatal(err)
	}
	if campaigns != 0 {
		t.Errorf("the deleted voucher's campaign stayed")
	}
}
