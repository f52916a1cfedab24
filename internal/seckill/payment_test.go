package seckill_test

import (
	"strings"
	"testing"

	"seckill/internal/seckill"
)

func TestFormatAmount(t *testing.T) {
	for _, tc := range []struct {
		amount   int64
		currency string
		want     string
	}{
		{100, "CNY", "1.00 CNY"},
		{1, "CNY", "0.01 CNY"},
		{0, "CNY", "0.00 CNY"},
		{1234567, "USD", "12345.67 USD"},
		{100, "JPY", "100 JPY"},
		{100, "KWD", "0.100 KWD"},
		{5, "KWD", "0.005 KWD"},
		{-250, "EUR", "-2.50 EUR"},
	} {
		if got := seckill.FormatAmount(tc.amount, tc.currency); got != tc.want {
			t.Errorf("FormatAmount(%d, %s) = %q, want %q", tc.amount, tc.currency, got, tc.want)
		}
	}
}

func TestPaymentEventValidate(t *testing.T) {
	good := seckill.PaymentEvent{ID: "evt_1", Type: seckill.EventRefundSucceeded, PaymentID: "pay_" + strings.Repeat("a", 32),
		Amount: 100, Currency: "CNY"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		mod   func(ev *seckill.PaymentEvent)
		field string
	}{
		{"no id", func(ev *seckill.PaymentEvent) { ev.ID = "" }, "id"},
		{"id too long", func(ev *seckill.PaymentEvent) { ev.ID = strings.Repeat("e", 129) }, "id"},
		// Two ids that differ only in bytes a decoder turns into U+FFFD
		// would be one: neither is an id.
		{"id with U+FFFD", func(ev *seckill.PaymentEvent) { ev.ID = "evt_\uFFFD" }, "id"},
		{"id with a space", func(ev *seckill.PaymentEvent) { ev.ID = "evt 1" }, "id"},
		{"unknown type", func(ev *seckill.PaymentEvent) { ev.Type = "payment.refunded" }, "type"},
		{"bad payment id", func(ev *seckill.PaymentEvent) { ev.PaymentID = "pay_A" }, "payment_id"},
		{"negative amount", func(ev *seckill.PaymentEvent) { ev.Amount = -1 }, "amount"},
		{"currency lower case", func(ev *seckill.PaymentEvent) { ev.Currency = "cny" }, "currency"},
		{"reason too long", func(ev *seckill.PaymentEvent) { ev.Reason = strings.Repeat("r", 501) }, "reason"},
		{"reason with a control character", func(ev *seckill.PaymentEvent) { ev.Reason = "no\x00" }, "reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := good
			tc.mod(&ev)
			err := ev.Validate()
			if seckill.ErrorCode(err) != seckill.EINVALID || seckill.ErrorField(err) != tc.field {
				t.Errorf("Validate = %v, want INVALID_INPUT on %s", err, tc.field)
			}
		})
	}
}

func TestRefundKey(t *testing.T) {
	id := "pay_" + strings.Repeat("ab", 16)
	if got := seckill.RefundKey(id, 1); got != "refund_"+strings.Repeat("ab", 16)+"_1" {
		t.Errorf("RefundKey = %q", got)
	}
	if seckill.RefundKey(id, 1) == seckill.RefundKey(id, 2) {
		t.Error("two generations share a key")
	}
}
