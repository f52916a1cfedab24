package seckill_test

import (
	"strings"
	"testing"

	"seckill/internal/seckill"
)

// TestEventMismatch: an event naming the provider's object applies only to
// the payment that object was opened for, with its amount and currency; a
// refund's event to a payment without a recorded object (opened before
// they were recorded) whatever it names; an event naming none (the built-in
// provider's) only to a payment opened without one.
func TestEventMismatch(t *testing.T) {
	const pay = "pay_0123456789abcdef0123456789abcdef"
	ev := func(typ, ref string, amount int64, currency string) seckill.PaymentEvent {
		return seckill.PaymentEvent{ID: "evt_1", Type: typ, PaymentID: pay, Amount: amount, Currency: currency, ProviderRef: ref}
	}
	for _, tc := range []struct {
		name string
		ev   seckill.PaymentEvent
		ref  string
		want string // a word of the reason, or "" for none
	}{
		{"its own success", ev(seckill.EventPaymentSucceeded, "pi_1", 100, "CNY"), "pi_1", ""},
		{"its own failure", ev(seckill.EventPaymentFailed, "pi_1", 100, "CNY"), "pi_1", ""},
		{"another's success", ev(seckill.EventPaymentSucceeded, "pi_2", 100, "CNY"), "pi_1", "pi_2, not pi_1"},
		{"another's failure", ev(seckill.EventPaymentFailed, "pi_2", 100, "CNY"), "pi_1", "pi_2, not pi_1"},
		{"a success, nothing recorded", ev(seckill.EventPaymentSucceeded, "pi_2", 100, "CNY"), "", "no reference"},
		{"a failure, nothing recorded", ev(seckill.EventPaymentFailed, "pi_2", 100, "CNY"), "", "no reference"},
		{"another amount", ev(seckill.EventPaymentSucceeded, "pi_1", 99, "CNY"), "pi_1", "0.99 CNY, not 1.00 CNY"},
		{"another currency", ev(seckill.EventPaymentSucceeded, "pi_1", 100, "USD"), "pi_1", "1.00 USD, not 1.00 CNY"},
		{"its own refund", ev(seckill.EventRefundSucceeded, "pi_1", 100, "CNY"), "pi_1", ""},
		{"another's refund", ev(seckill.EventRefundFailed, "pi_2", 100, "CNY"), "pi_1", "pi_2, not pi_1"},
		{"a refund, nothing recorded", ev(seckill.EventRefundSucceeded, "pi_2", 100, "CNY"), "", ""},
		{"the built-in provider's", ev(seckill.EventPaymentSucceeded, "", 99, "USD"), "", ""},
		{"the built-in provider's for a payment opened at Stripe", ev(seckill.EventPaymentSucceeded, "", 100, "CNY"), "pi_1", "opened at the provider as pi_1"},
		{"the built-in provider's refund for a payment opened at Stripe", ev(seckill.EventRefundSucceeded, "", 100, "CNY"), "pi_1", "names no provider's object"},
	} {
		got := tc.ev.Mismatch(tc.ref, 100, "CNY")
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: Mismatch = %q, want %q", tc.name, got, tc.want)
		}
	}
	bad := ev(seckill.EventPaymentSucceeded, "pi 1", 100, "CNY")
	if seckill.ErrorCode(bad.Validate()) != seckill.EINVALID {
		t.Error("a reference with a space is valid")
	}
	bad.ProviderRef = "pi_" + strings.Repeat("x", seckill.MaxProviderRefLen)
	if seckill.ErrorCode(bad.Validate()) != seckill.EINVALID {
		t.Error("an overlong reference is valid")
	}
}
