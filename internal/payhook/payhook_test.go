package payhook_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"seckill/internal/payhook"
)

func TestVerify(t *testing.T) {
	secret, other := []byte("a-webhook-secret"), []byte("another-secret!!")
	body := []byte(`{"id":"evt_1"}`)
	now := time.Unix(1_800_000_000, 0)
	good := payhook.Sign(secret, now, body)
	_, sig, _ := strings.Cut(good, ",")
	tests := []struct {
		name   string
		header string
		body   []byte
		at     time.Time
		want   error
	}{
		{"good", good, body, now, nil},
		{"within tolerance", good, body, now.Add(payhook.Tolerance), nil},
		{"rotation: one of two matches", payhook.Sign(other, now, body) + "," + sig, body, now, nil},
		{"unknown scheme ignored", good + ",v0=abc", body, now, nil},
		{"stale", good, body, now.Add(payhook.Tolerance + time.Second), payhook.ErrStale},
		{"future", good, body, now.Add(-payhook.Tolerance - time.Second), payhook.ErrStale},
		{"other secret", payhook.Sign(other, now, body), body, now, payhook.ErrSignature},
		{"other body", good, []byte(`{"id":"evt_2"}`), now, payhook.ErrSignature},
		{"timestamp changed", strings.Replace(good, "t=1800000000", "t=1800000001", 1), body, now, payhook.ErrSignature},
		{"empty", "", body, now, payhook.ErrMalformed},
		{"no signature", "t=1800000000", body, now, payhook.ErrMalformed},
		{"no timestamp", sig, body, now, payhook.ErrMalformed},
		{"two timestamps", "t=1," + good, body, now, payhook.ErrMalformed},
		{"short signature", "t=1800000000,v1=abcd", body, now, payhook.ErrMalformed},
		{"not hex", "t=1800000000,v1=" + strings.Repeat("zz", 32), body, now, payhook.ErrMalformed},
		{"no equals", "t=1800000000,v1", body, now, payhook.ErrMalformed},
		{"huge header", good + strings.Repeat(",x=y", 300), body, now, payhook.ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := payhook.Verify(secret, tc.header, tc.body, tc.at); !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}
