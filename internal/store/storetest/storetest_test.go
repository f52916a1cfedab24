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
