package report

import (
	"fmt"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// numbers formats integers with thousands separators. A Printer copies
// itself for each call, so one serves every goroutine.
var numbers = message.NewPrinter(language.English)

// Number formats n with thousands separators: 1234567 -> "1,234,567".
func Number(n int64) string { return numbers.Sprint(n) }

// Millis formats milliseconds with three significant digits.
func Millis(v float64) string {
	switch {
	case v >= 10_000:
		return fmt.Sprintf("%.1f s", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.2f ms", v)
}

// Duration formats d like Millis.
func Duration(d time.Duration) string { return Millis(Ms(d)) }

// Seconds formats s seconds like Millis.
func Seconds(s float64) string { return Millis(s * 1000) }
