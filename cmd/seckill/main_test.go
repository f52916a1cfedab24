package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"seckill/internal/auth"
	"seckill/internal/config"
)

func TestTokenCommand(t *testing.T) {
	t.Setenv("SECKILL_ENV", "dev")
	t.Setenv("SECKILL_JWT_SECRET", "")
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"token", "--user", "42", "--admin"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	tokens := auth.NewTokens([]byte(config.DevJWTSecret), "seckill")
	u, err := tokens.Parse(strings.TrimSpace(out.String()))
	if err != nil || u.ID != 42 || !u.Admin {
		t.Fatalf("token parses to %+v, %v", u, err)
	}

	file := filepath.Join(t.TempDir(), "tokens.txt")
	if err := run(context.Background(), []string{"token", "--users", "5-9", "--out", file}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(raw))
	if len(lines) != 5 {
		t.Fatalf("%d tokens, want 5", len(lines))
	}
	for i, l := range lines {
		u, err := tokens.Parse(l)
		if err != nil || u.ID != int64(5+i) || u.Admin {
			t.Fatalf("line %d parses to %+v, %v", i, u, err)
		}
	}
}

func TestCommandErrors(t *testing.T) {
	t.Setenv("SECKILL_ENV", "dev")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "subcommand is required"},
		{[]string{"fly"}, `unknown subcommand "fly"`},
		{[]string{"token"}, "exactly one of --user"},
		{[]string{"token", "--user", "1", "--users", "1-2"}, "exactly one of --user"},
		{[]string{"token", "--users", "9-1"}, "range of positive ids"},
		{[]string{"token", "--user", "1", "--ttl", "-1h"}, "--ttl must be positive"},
		{[]string{"migrate", "sideways"}, `unknown command "sideways"`},
		{[]string{"demo", "--url", "ftp://localhost"}, "--url must be the server's http://"},
		{[]string{"demo", "--stock", "0"}, "must be positive"},
		{[]string{"demo", "now"}, `unexpected argument "now"`},
		{[]string{"demo", "--url", "http://127.0.0.1:1"}, "is the server running"},
		{[]string{"bench"}, "its own program: seckill-bench"},
		{[]string{"admin"}, "usage: seckill admin create --user NAME"},
		{[]string{"admin", "delete"}, "usage: seckill admin create --user NAME"},
		{[]string{"admin", "create"}, "--user NAME is required"},
		{[]string{"payments", "refund"}, "usage: seckill payments simulate --order ID"},
		{[]string{"shards"}, "usage: seckill shards VOUCHER_ID"},
		{[]string{"shards", "42", "v42"}, `"v42" is not a voucher id`},
	} {
		err := run(context.Background(), tt.args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q) = %v, want an error mentioning %q", tt.args, err, tt.want)
		}
	}
}

func TestServeRefusesBadConfig(t *testing.T) {
	t.Setenv("SECKILL_ENV", "prod")
	t.Setenv("SECKILL_JWT_SECRET", "")
	err := run(context.Background(), []string{"serve"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "SECKILL_JWT_SECRET is required") {
		t.Fatalf("serve without a secret in production: %v", err)
	}
}

// Production stays strict: without a secret, no command signs a token.
func TestTokensNeedASecretInProduction(t *testing.T) {
	t.Setenv("SECKILL_ENV", "")
	t.Setenv("SECKILL_JWT_SECRET", "")
	for _, args := range [][]string{{"token", "--user", "1"}, {"demo"}} {
		var out bytes.Buffer
		err := run(context.Background(), args, &out, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "SECKILL_JWT_SECRET is required") || out.Len() != 0 {
			t.Errorf("run(%q) without a secret: %v, printed %q", args, err, out.String())
		}
	}
}
