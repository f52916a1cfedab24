package app

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"seckill/internal/auth"
	"seckill/internal/config"
)

// TokenRange parses "1-1000" (or a single id) into its bounds.
func TokenRange(s string) (lo, hi int64, err error) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		b = a
	}
	lo, err1 := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	hi, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	if err1 != nil || err2 != nil || lo <= 0 || hi < lo {
		return 0, 0, fmt.Errorf("--users must be a range of positive ids such as 1-1000, not %q", s)
	}
	if hi-lo >= 10_000_000 {
		return 0, 0, fmt.Errorf("--users: at most 10,000,000 tokens at once")
	}
	return lo, hi, nil
}

// WriteTokens signs one token per user id in [lo, hi] and writes them one a
// line to path ("-" for out).
func WriteTokens(cfg *config.Config, lo, hi int64, admin bool, ttl time.Duration, path string, out io.Writer) error {
	tokens := auth.NewTokens([]byte(cfg.JWTSecret), cfg.JWTIssuer)
	w := out
	if path != "-" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	for id := lo; id <= hi; id++ {
		t, err := tokens.Issue(id, admin, ttl)
		if err != nil {
			return err
		}
		fmt.Fprintln(bw, t)
	}
	return bw.Flush()
}
