package store_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/uptrace/bun/dialect/pgdialect"

	"seckill/internal/store"
	"seckill/internal/store/storetest"
)

// TestArrayLiterals sends the array literals the prepared statements take
// to Postgres as text parameters, as the prepared statements do (through
// database/sql, not bun's formatter), and reads them back through bun's array
// scanner: what Postgres parses must be what was written, whatever the
// strings hold (quotes, backslashes, braces, commas, NULL, spaces, none).
func TestArrayLiterals(t *testing.T) {
	db := storetest.NewDB(t)
	ctx := t.Context()
	texts := []string{"evt_1", "", `a"b`, `back\slash`, `\"`, "{x,y}", "NULL", "null", " spaced ", "comma,here", "ünï €", "tab\there", "line\nbreak"}
	var gotTexts []string
	if err := db.DB.QueryRowContext(ctx, `SELECT $1::text[]`, store.TextArray(texts)).Scan(pgdialect.Array(&gotTexts)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(texts, gotTexts); diff != "" {
		t.Errorf("text[] (-want +got):\n%s", diff)
	}
	ints := []int64{1, -2, 0, math.MaxInt64, math.MinInt64}
	var gotInts []int64
	if err := db.DB.QueryRowContext(ctx, `SELECT $1::bigint[]`, store.Int64Array(ints)).Scan(pgdialect.Array(&gotInts)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ints, gotInts); diff != "" {
		t.Errorf("bigint[] (-want +got):\n%s", diff)
	}
	for _, empty := range []string{store.TextArray(nil), store.Int64Array(nil)} {
		var n int
		if err := db.DB.QueryRowContext(ctx, `SELECT cardinality($1::text[])`, empty).Scan(&n); err != nil || n != 0 {
			t.Errorf("%q: %d elements, %v", empty, n, err)
		}
	}
}
