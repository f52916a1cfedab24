package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/bench"
)

func TestParseFlags(t *testing.T) {
	cfg, asJSON, err := parseFlags([]string{"--rate", "500", "--duration", "3s", "--compare", "sync,ceiling", "--compare", "fsync,limit",
		"--seckill", "/opt/seckill", "--fsync-dir", "/var/tmp", "--json"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !asJSON || cfg.Rate != 500 || cfg.Duration != 3*time.Second || cfg.Fsync.SeckillBin != "/opt/seckill" || cfg.Fsync.Dir != "/var/tmp" {
		t.Errorf("parsed %+v, json %v", cfg, asJSON)
	}
	if diff := cmp.Diff([]string{bench.CompareSync, bench.CompareCeiling, bench.CompareFsync, bench.CompareLimit}, cfg.Compare); diff != "" {
		t.Errorf("compare (-want +got):\n%s", diff)
	}
}

func TestParseBaseFlags(t *testing.T) {
	cfg, _, err := parseFlags([]string{"--compare", "base", "--base-binary", ".run/bench-base/abc/seckill", "--rounds", "4",
		"--seckill", "bin/seckill", "--duration", "3s"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := bench.BaseConfig{Binary: ".run/bench-base/abc/seckill"}
	if diff := cmp.Diff(want, cfg.Base); diff != "" || cfg.Rounds != 4 || cfg.Fsync.SeckillBin != "bin/seckill" || cfg.Duration != 3*time.Second {
		t.Errorf("base (-want +got):\n%s\n%+v", diff, cfg)
	}
}

func TestParsePayFlags(t *testing.T) {
	cfg, _, err := parseFlags([]string{"--pay-ratio", "0.7", "--pay-delay", "200ms", "--pay-window", "5s"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := bench.PayConfig{On: true, Ratio: 0.7, Delay: 200 * time.Millisecond, Window: 5 * time.Second}
	if diff := cmp.Diff(want, cfg.Pay); diff != "" {
		t.Errorf("pay (-want +got):\n%s", diff)
	}
	// A pay window alone turns payment on, with nobody paying.
	if cfg, _, _ = parseFlags([]string{"--pay-window", "5s"}, &bytes.Buffer{}); !cfg.Pay.On || cfg.Pay.Ratio != 0 {
		t.Errorf("--pay-window alone: %+v", cfg.Pay)
	}
	if cfg, _, _ = parseFlags(nil, &bytes.Buffer{}); cfg.Pay.On {
		t.Errorf("no pay flag: %+v", cfg.Pay)
	}
}

func TestCommandErrors(t *testing.T) {
	t.Setenv("SECKILL_ENV", "dev")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--compare", "fast"}, `unknown target "fast"`},
		{[]string{"--stock", "-1"}, "--stock"},
		{[]string{"--pay-ratio", "1.5"}, "--pay-ratio must be between 0 and 1"},
		{[]string{"--pay-window", "1500ms"}, "--pay-window must be whole seconds"},
		{[]string{"--pay-window", "5s", "--voucher", "3"}, "omit --voucher"},
		{[]string{"--pay-ratio", "0.5", "--compare", "sync"}, "omit --compare"},
		{[]string{"--url", "http://127.0.0.1:1/graphql", "--timeout", "1s"}, "cannot reach http://127.0.0.1:1/graphql"},
		{[]string{"--compare", "base"}, "--compare base needs --base-binary PATH"},
		{[]string{"--compare", "base,limit", "--base-binary", "x"}, "give it alone"},
		{[]string{"--compare", "base", "--base-binary", "x", "--rate", "100"}, "omit --rate"},
		{[]string{"--compare", "base", "--base-binary", "/nonexistent/seckill"}, "--base-binary"},
	} {
		err := run(context.Background(), tc.args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error mentioning %q", tc.args, err, tc.want)
		}
	}
	var help bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &bytes.Buffer{}, &help); !errors.Is(err, flag.ErrHelp) ||
		!strings.Contains(help.String(), "--compare fsync") || !strings.Contains(help.String(), "--compare limit") ||
		!strings.Contains(help.String(), "--compare base --base-binary PATH") {
		t.Errorf("--help: %v\n%s", err, help.String())
	}
}

func TestParseShardsFlag(t *testing.T) {
	cfg, _, err := parseFlags([]string{"--shards", "1,3", "--duration", "5s"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 3}, cfg.Shards); diff != "" {
		t.Errorf("shards (-want +got):\n%s", diff)
	}
	for _, args := range [][]string{{"--shards", "0"}, {"--shards", "65"}, {"--shards", "x"}, {"--shards", "3", "--compare", "sync"}} {
		if _, _, err := parseFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestParseStormFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bench.StormConfig
	}{
		{[]string{"--expiry-storm", "500", "--pay-window", "20s", "--concurrency", "16", "--duration", "2s", "--expiry-timeout", "5m"},
			bench.StormConfig{Kind: bench.StormExpiry, Units: 500, Callers: 16, ProbeDuration: 2 * time.Second, Timeout: 5 * time.Minute}},
		{[]string{"--cancel-storm", "700", "--storm-callers", "32", "--storm-timeout", "1m"},
			bench.StormConfig{Kind: bench.StormCancel, Units: 700, Closers: 32, Timeout: time.Minute}},
		{[]string{"--payment-storm", "900", "--concurrency", "8"},
			bench.StormConfig{Kind: bench.StormPayment, Units: 900, Callers: 8}},
	} {
		cfg, _, err := parseFlags(tc.args, &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if diff := cmp.Diff(tc.want, cfg.Storm); diff != "" || cfg.Concurrency != 0 || cfg.Duration != 0 {
			t.Errorf("%q: storm (-want +got):\n%s\nconcurrency %d, duration %s", tc.args, diff, cfg.Concurrency, cfg.Duration)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cancel-storm", "10", "--payment-storm", "10"}, "one storm at a time"},
		{[]string{"--payment-storm", "10", "--stock", "5"}, "--payment-storm N sets the campaign's units"},
		{[]string{"--cancel-storm", "10", "--shards", "2"}, "omit --voucher, --compare and the storms"},
		{[]string{"--expiry-storm", "10", "--expiry-timeout", "1m", "--storm-timeout", "1m"}, "not both"},
	} {
		if _, _, err := parseFlags(tc.args, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}
