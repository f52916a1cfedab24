package store

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"seckill/internal/seckill"
)

// TestOneRow: a query's missing row is ENOTFOUND naming the row; any other
// failure keeps its cause and says what was done.
func TestOneRow(t *testing.T) {
	if err := oneRow(nil, "store: select", "voucher", 7); err != nil {
		t.Errorf("no error: %v", err)
	}
	err := oneRow(fmt.Errorf("scan: %w", sql.ErrNoRows), "store: select", "voucher", 7)
	if seckill.ErrorCode(err) != seckill.ENOTFOUND || seckill.ErrorMessage(err) != "voucher 7 not found" {
		t.Errorf("no row: %v (code %s)", err, seckill.ErrorCode(err))
	}
	cause := errors.New("connection reset")
	err = oneRow(cause, "lock", "payment", "pay_1")
	if !errors.Is(err, cause) || err.Error() != "lock payment pay_1: connection reset" || seckill.ErrorCode(err) != seckill.EINTERNAL {
		t.Errorf("failure: %v (code %s)", err, seckill.ErrorCode(err))
	}
}
