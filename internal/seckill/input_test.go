package seckill

import (
	"strings"
	"testing"
	"time"
)

func TestParseID(t *testing.T) {
	valid := map[string]int64{"1": 1, "42": 42, "9223372036854775807": 1<<63 - 1}
	for s, want := range valid {
		if got, err := ParseID("id", s); err != nil || got != want {
			t.Errorf("ParseID(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "00", "01", "+1", "-1", " 1", "1 ", "1.0", "1e3", "0x1", "١", "9223372036854775808", "99999999999999999999"} {
		if _, err := ParseID("voucherId", s); ErrorCode(err) != EINVALID || err.(*Error).Field != "voucherId" {
			t.Errorf("ParseID(%q): %v, want INVALID_INPUT on voucherId", s, err)
		}
	}
}

func TestValidateText(t *testing.T) {
	now := time.Now()
	valid := func() NewSeckillVoucher {
		return NewSeckillVoucher{ShopID: 1, Title: "100 off 200", PayValue: 100, ActualValue: 200, Stock: 10,
			BeginTime: now, EndTime: now.Add(time.Hour)}
	}
	tests := []struct {
		name  string
		edit  func(*NewSeckillVoucher)
		field string // "" when valid
	}{
		{"plain", func(*NewSeckillVoucher) {}, ""},
		{"non-ASCII", func(v *NewSeckillVoucher) { v.Title = "秒杀 100 € off"; v.SubTitle = "ça va" }, ""},
		{"rules on lines", func(v *NewSeckillVoucher) { v.Rules = "one per user\r\n\tweekdays only" }, ""},
		{"NUL in title", func(v *NewSeckillVoucher) { v.Title = "a\x00b" }, "title"},
		{"DEL in title", func(v *NewSeckillVoucher) { v.Title = "a\x7fb" }, "title"},
		{"C1 in title", func(v *NewSeckillVoucher) { v.Title = "a\u0085b" }, "title"},
		{"tab in title", func(v *NewSeckillVoucher) { v.Title = "a\tb" }, "title"},
		{"not UTF-8 in title", func(v *NewSeckillVoucher) { v.Title = "a\xffb" }, "title"},
		{"newline in subTitle", func(v *NewSeckillVoucher) { v.SubTitle = "a\nb" }, "subTitle"},
		{"escape in subTitle", func(v *NewSeckillVoucher) { v.SubTitle = "\x1b[2J" }, "subTitle"},
		{"NUL in rules", func(v *NewSeckillVoucher) { v.Rules = "a\x00" }, "rules"},
		{"not UTF-8 in rules", func(v *NewSeckillVoucher) { v.Rules = strings.Repeat("\xc3", 3) }, "rules"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := valid()
			tt.edit(&in)
			err := in.Validate(now)
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.field != "" && (ErrorCode(err) != EINVALID || ErrorField(err) != tt.field):
				t.Errorf("got %v, want INVALID_INPUT on %s", err, tt.field)
			}
		})
	}
}
