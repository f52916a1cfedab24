package seckill

import (
	"strconv"
	"strings"
)

// Money. Every amount in seckill (a voucher's payValue, an order's amount,
// a payment, a refund) is an integer count of its currency's minor unit: 100
// is 1.00 CNY, 100 JPY (the yen has no minor unit), 0.100 KWD. Whatever
// shows an amount to a person (the command line, the dashboard, logs) writes
// it with FormatAmount, so that one amount reads the same everywhere.

// DefaultCurrency is the payments' currency unless SECKILL_PAYMENT_CURRENCY
// says otherwise.
const DefaultCurrency = "CNY"

// minorDigits lists the ISO 4217 currencies whose minor unit is not a
// hundredth of the major one (the same list payment providers such as
// Stripe use for their "zero-decimal" and "three-decimal" currencies).
var minorDigits = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
	"RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
	"CLF": 4, "UYW": 4,
}

// MinorDigits returns how many decimal digits a currency's minor unit has:
// 2 for most, 0 for JPY, 3 for KWD.
func MinorDigits(currency string) int {
	if d, ok := minorDigits[currency]; ok {
		return d
	}
	return 2
}

// ValidCurrency reports whether c has the form of an ISO 4217 code: three
// capital letters.
func ValidCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for _, b := range []byte(c) {
		if b < 'A' || b > 'Z' {
			return false
		}
	}
	return true
}

// FormatAmount writes an amount in minor units with its currency, the way
// a person reads it: FormatAmount(100, "CNY") is "1.00 CNY",
// FormatAmount(100, "JPY") "100 JPY", FormatAmount(1234567, "CNY")
// "12345.67 CNY".
func FormatAmount(amount int64, currency string) string {
	var b strings.Builder
	u := uint64(amount)
	if amount < 0 {
		b.WriteByte('-')
		u = -u
	}
	digits := strconv.FormatUint(u, 10)
	if d := MinorDigits(currency); d > 0 {
		if len(digits) <= d {
			digits = strings.Repeat("0", d-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-d] + "." + digits[len(digits)-d:]
	}
	b.WriteString(digits)
	b.WriteByte(' ')
	b.WriteString(currency)
	return b.String()
}
