package stripepay

import (
	"strings"

	"seckill/internal/seckill"
)

// Stripe's amounts are integers in what Stripe calls the currency's
// smallest unit (https://docs.stripe.com/currencies). For most currencies
// that is ours (seckill.MinorDigits: a hundredth), but not for all:
//
//   - zero-decimal currencies (JPY, KRW, …) take whole units; MGA is one
//     for Stripe though ISO 4217 gives it two digits;
//   - ISK and UGX are zero-decimal but Stripe takes them as two-decimal
//     amounts for backwards compatibility (5 ISK is 500);
//   - three-decimal currencies (BHD, JOD, KWD, OMR, TND) take thousandths
//     whose last digit must be 0.
//
// stripeDigits is how many decimal digits Stripe's amount field carries
// where that differs from 2.
var stripeDigits = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "JPY": 0, "KMF": 0, "KRW": 0, "MGA": 0, "PYG": 0,
	"RWF": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "JOD": 3, "KWD": 3, "OMR": 3, "TND": 3,
}

func digitsAtStripe(currency string) int {
	if d, ok := stripeDigits[currency]; ok {
		return d
	}
	return 2
}

var pow10 = [...]int64{1, 10, 100, 1000, 10000}

// toStripeAmount converts an amount in our minor units (seckill money.go)
// to Stripe's amount field and its lower-case currency. EINVALID for an
// amount Stripe cannot represent exactly (a fraction of a yen would be
// lost) or a three-decimal amount whose last digit is not 0.
func toStripeAmount(amount int64, currency string) (int64, string, error) {
	if !seckill.ValidCurrency(currency) {
		return 0, "", seckill.Invalidf("currency", "currency %q is not an ISO 4217 code", currency)
	}
	ours, theirs := seckill.MinorDigits(currency), digitsAtStripe(currency)
	out := amount
	switch {
	case ours > theirs:
		f := pow10[ours-theirs]
		if amount%f != 0 {
			return 0, "", seckill.Errorf(seckill.EINVALID, "%s cannot be paid through Stripe: it takes %s in steps of %s",
				seckill.FormatAmount(amount, currency), currency, seckill.FormatAmount(f, currency))
		}
		out = amount / f
	case ours < theirs:
		out = amount * pow10[theirs-ours]
	}
	if theirs == 3 && out%10 != 0 {
		return 0, "", seckill.Errorf(seckill.EINVALID, "%s cannot be paid through Stripe: three-decimal amounts must end in 0",
			seckill.FormatAmount(amount, currency))
	}
	return out, strings.ToLower(currency), nil
}

// fromStripeAmount converts Stripe's amount and currency (lower case) back
// to our minor units and currency code. ok is false when the amount has a
// part our minor unit cannot hold.
func fromStripeAmount(amount int64, stripeCurrency string) (int64, string, bool) {
	currency := strings.ToUpper(stripeCurrency)
	if !seckill.ValidCurrency(currency) {
		return 0, "", false
	}
	ours, theirs := seckill.MinorDigits(currency), digitsAtStripe(currency)
	switch {
	case theirs > ours:
		f := pow10[theirs-ours]
		if amount%f != 0 {
			return 0, "", false
		}
		return amount / f, currency, true
	case theirs < ours:
		return amount * pow10[ours-theirs], currency, true
	}
	return amount, currency, true
}
