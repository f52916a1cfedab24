package storetest

import "testing"

// TestEmptyWithoutSuperuser: on a server where the tests' user is no
// superuser (the tables cannot be emptied without their triggers), a
// database is emptied by one TRUNCATE of every table, and used again.
func TestEmptyWithoutSuperuser(t *testing.T) {
	var oids [2]int64
	use := func(t *testing.T, i int) (firstID int64, found int) {
		db := NewDB(t)
		ctx := t.Context()
		if err := db.QueryRowContext(ctx, "SELECT oid FROM pg_database WHERE datname = current_database()").Scan(&oids[i]); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM voucher) + (SELECT count(*) FROM voucher_order)").Scan(&found); err != nil {
			t.Fatal(err)
		}
		firstID = CreateCampaign(t, db, 5).ID
		if _, err := db.ExecContext(ctx, `INSERT INTO voucher_order (id, user_id, voucher_id, admitted_at, amount, pay_by)
			SELECT g, g, ?, now(), 100, now() + interval '1 hour' FROM generate_series(1, 5) AS g`, firstID); err != nil {
			t.Fatal(err)
		}
		return firstID, found
	}
	var saved emptyPlan
	t.Run("filled", func(t *testing.T) {
		use(t, 0)
		// The plan is known once a database was created; the database is
		// emptied when this subtest ends.
		poolMu.Lock()
		saved = emptying
		emptying.superuser = false
		poolMu.Unlock()
	})
	poolMu.Lock()
	emptying = saved
	poolMu.Unlock()
	t.Run("again", func(t *testing.T) {
		if first, found := use(t, 1); found != 0 || first != 1 {
			t.Errorf("the next test found %d rows, and its first voucher got id %d", found, first)
		}
	})
	if oids[1] != oids[0] {
		t.Errorf("the second test got database %d, not the first's %d emptied", oids[1], oids[0])
	}
}
