package views

import (
	"fmt"

	"github.com/a-h/templ"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"seckill/internal/seckill"
)

// numbers formats integers with thousands separators; a Printer copies
// itself for each call, so one serves every request.
var numbers = message.NewPrinter(language.English)

// num formats an integer with thousands separators: 1234567 -> "1,234,567".
func num[T ~int | ~int64](n T) string { return numbers.Sprint(int64(n)) }

// amount writes an amount in minor units with its currency, as everything
// that shows money does (seckill.FormatAmount): 12345, "CNY" -> "123.45 CNY".
func amount(n int64, currency string) string { return seckill.FormatAmount(n, currency) }

// rate formats a per-second rate.
func rate(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return num(int64(math.Round(v)))
}

// utc is the fallback text and the hover title of a time.
func utc(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// iso is a time's datetime attribute.
func iso(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// latency formats a queue's oldest task's age.
func latency(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	return d.Round(time.Second).String()
}

// statusClass is the CSS class of a status badge.
func statusClass(s string) string { return "badge " + strings.ToLower(s) }

// statusText is a status as people read it.
func statusText(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", " ") }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func campaignURL(id int64) string { return "/admin/campaigns/" + itoa(id) }

// checkAttrs are the data-check-* attributes the script reads to check a
// field before the form is sent.
func checkAttrs(c Check) templ.Attributes {
	a := templ.Attributes{}
	if c.Required != "" {
		a["data-check-required"] = c.Required
	}
	if c.Message != "" {
		a["data-check-msg"] = c.Message
		a["data-check-min"] = strconv.FormatInt(c.Min, 10)
		if c.Max >= 0 {
			a["data-check-max"] = strconv.FormatInt(c.Max, 10)
		}
		if c.AtLeast != "" {
			a["data-check-at-least"] = c.AtLeast
		}
	}
	return a
}

// oldestPayBy is the hint under the orders awaiting payment.
func oldestPayBy(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return "oldest pays by " + utc(t)
}

// window says a duration of whole seconds the way an operator reads it:
// "15 minutes", "1 hour 30 minutes", "45 seconds".
func window(d time.Duration) string {
	d = d.Round(time.Second)
	var parts []string
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if n := int64(d / u.d); n > 0 {
			name := u.name
			if n != 1 {
				name += "s"
			}
			parts = append(parts, itoa(n)+" "+name)
			d -= time.Duration(n) * u.d
		}
	}
	if len(parts) == 0 {
		return "0 seconds"
	}
	return strings.Join(parts, " ")
}
