package storetest_test

import (
	"context"
	"testing"

	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

func TestNewDSN(t *testing.T) {
	var dsns []string
	t.Run("create", func(t *testing.T) {
		for range 2 {
			dsn := storetest.NewDSN(t)
			db, err := store.Open(t.Context(), dsn, 2)
			if err != nil {
				t.Fatal(err)
			}
			// Migrated: the schema is there, and empty.
			n, err := db.NewSelect().Table("voucher").Count(t.Context())
			if err != nil || n != 0 {
				t.Errorf("count vouchers: %d, %v", n, err)
			}
			// Left open on purpose: the drop must not wait for it.
			t.Cleanup(func() { db.Close() })
			dsns = append(dsns, dsn)
		}
	})
	if len(dsns) != 2 || dsns[0] == dsns[1] {
		t.Fatalf("DSNs %q", dsns)
	}
	for _, dsn := range dsns {
		if db, err := store.Open(context.Background(), dsn, 1); err == nil {
			db.Close()
			t.Errorf("%s still exists after its test", dsn)
		}
	}
}

func TestNewDB(t *testing.T) {
	db := storetest.NewDB(t)
	v := storetest.CreateCampaign(t, db, 5)
	got, err := store.New(db).Voucher(t.Context(), v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Campaign == nil || got.Campaign.Stock != 5 {
		t.Errorf("campaign %+v", got.Campaign)
	}
}

func TestNewEmptyDSN(t *testing.T) {
	db, err := store.Open(t.Context(), storetest.NewEmptyDSN(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d tables in an empty database", n)
	}
}

// TestNewDSNReusesEmptied: a test's database is used again by the next test
// of the process (the same database, under a new name), emptied, with its
// identities restarted, whether its tables hold a few rows or many; one
// whose schema a test changed is dropped instead.
func TestNewDSNReusesEmptied(t *testing.T) {
	// use opens a database, counts its vouchers and orders, creates two
	// campaigns, orders orders of the first, and makes change; it returns
	// the database's oid (which a rename keeps), the first voucher's id and
	// the rows it found.
	use := func(t *testing.T, orders int, change string) (oid, firstID int64, found int) {
		db := storetest.NewDB(t)
		ctx := t.Context()
		if err := db.QueryRowContext(ctx, "SELECT oid FROM pg_database WHERE datname = current_database()").Scan(&oid); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM voucher) + (SELECT count(*) FROM voucher_order)").Scan(&found); err != nil {
			t.Fatal(err)
		}
		firstID = storetest.CreateCampaign(t, db, int64(orders)+1).ID
		storetest.CreateCampaign(t, db, 3)
		if _, err := db.ExecContext(ctx, `INSERT INTO voucher_order (id, user_id, voucher_id, admitted_at, amount, pay_by)
			SELECT g, g, ?, now(), 100, now() + interval '1 hour' FROM generate_series(1, ?) AS g`, firstID, orders); err != nil {
			t.Fatal(err)
		}
		if change != "" {
			if _, err := db.ExecContext(ctx, change); err != nil {
				t.Fatal(err)
			}
		}
		return oid, firstID, found
	}
	var oids [4]int64
	t.Run("many orders", func(t *testing.T) {
		var first int64
		oids[0], first, _ = use(t, 20_000, "") // over a megabyte: truncated
		if first != 1 {
			t.Errorf("first voucher id %d in a fresh database", first)
		}
	})
	// reused runs use on a database an earlier test left: it must be empty.
	reused := func(i int, change string) func(t *testing.T) {
		return func(t *testing.T) {
			var first int64
			var found int
			oids[i], first, found = use(t, 5, change)
			if found != 0 || first != 1 {
				t.Errorf("the next test found %d rows, and its first voucher got id %d", found, first)
			}
		}
	}
	t.Run("few orders", reused(1, ""))
	t.Run("a function added", reused(2, "CREATE FUNCTION left_behind() RETURNS int LANGUAGE sql AS 'SELECT 1'"))
	t.Run("after", func(t *testing.T) {
		oids[3], _, _ = use(t, 0, "")
	})
	if oids[1] != oids[0] || oids[2] != oids[0] {
		t.Errorf("the tests got databases %v, not the first test's emptied", oids[:3])
	}
	if oids[3] == oids[2] {
		t.Errorf("the last test got database %d, which the one before changed", oids[3])
	}
	db := storetest.NewDB(t)
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_database WHERE oid = ?", oids[2]).Scan(&n); err != nil || n != 0 {
		t.Errorf("the database a test changed: %d left, %v", n, err)
	}
}
