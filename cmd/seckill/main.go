// Command seckill is the flash-sale service: API server, workers,
// migrations, tokens and operators, as subcommands. The load test is a
// separate program, cmd/seckill-bench.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"seckill/internal/app"
	"seckill/internal/cli"
	"seckill/internal/config"
)

const usage = `seckill: a flash-sale service.

Usage:
  seckill serve [--worker=true]     HTTP API (GraphQL, health, metrics) and, unless --worker=false, the workers
  seckill worker                    the persistence workers alone
  seckill migrate [up|down|status]  database migrations (default up)
  seckill token --user ID [--admin] [--ttl 24h]
  seckill token --users 1-1000 [--out tokens.txt] [--ttl 24h]
  seckill admin create --user NAME [--password-stdin]   a dashboard operator (password prompted or from stdin)
  seckill demo [--url URL] [--stock 100] [--duration 1h] [--buyer 1001]
                                    a campaign on sale now on a running server, and shell commands that buy, query and follow an order
  seckill shards VOUCHER_ID...      where each stock shard of the campaigns lives (tag, slot, master); fails when they share masters needlessly
  seckill payments simulate --order ID [--payment ID] [--url URL] [--fail]
                                    play the payment provider: open the order's payment (or take the one named), sign and send its webhook event
  seckill payments provider [--listen 127.0.0.1:8090] [--webhook URL] [--refuse] [--delay 200ms]
                                    a development payment provider: answers the refund call, confirms each refund by webhook

Configuration comes from SECKILL_* environment variables; see docs/configuration.md.
The load test is its own program: seckill-bench --help.
`

func main() { cli.Main("seckill", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return errors.New("a subcommand is required")
		}
		return nil
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		worker := fs.Bool("worker", true, "also run the persistence workers in this process")
		if err := fs.Parse(args); err != nil {
			return err
		}
		cfg, err := config.Load(nil)
		if err != nil {
			return err
		}
		return app.Serve(ctx, cfg, app.NewLogger(cfg), *worker, stdout)
	case "worker":
		cfg, err := config.Load(nil)
		if err != nil {
			return err
		}
		return app.Worker(ctx, cfg, app.NewLogger(cfg))
	case "migrate":
		sub := "up"
		if len(args) > 0 {
			sub = args[0]
		}
		if sub != "up" && sub != "down" && sub != "status" {
			return fmt.Errorf("migrate: unknown command %q (want up, down or status)", sub)
		}
		cfg, err := config.Load(nil)
		if err != nil {
			return err
		}
		return app.Migrate(ctx, cfg, sub, stdout)
	case "token":
		return token(args, stdout, stderr)
	case "admin":
		return admin(ctx, args, stdout, stderr)
	case "bench":
		return errors.New("the load test is its own program: seckill-bench (make bench-load builds it)")
	case "demo":
		return demo(ctx, args, stdout, stderr)
	case "payments":
		return payments(ctx, args, stdout, stderr)
	case "shards":
		return shards(ctx, args, stdout)
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown subcommand %q", cmd)
	}
}

func token(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	user := fs.Int64("user", 0, "user id to sign a token for")
	users := fs.String("users", "", "a range of user ids, e.g. 1-1000: one token a line")
	admin := fs.Bool("admin", false, "give the token the admin role")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	out := fs.String("out", "-", "file to write tokens to (- for stdout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*user == 0) == (*users == "") {
		return errors.New("token: give exactly one of --user ID or --users FROM-TO")
	}
	if *ttl <= 0 {
		return errors.New("token: --ttl must be positive")
	}
	cfg, err := config.Load(nil)
	if err != nil {
		return err
	}
	lo, hi := *user, *user
	if *users != "" {
		if lo, hi, err = app.TokenRange(*users); err != nil {
			return err
		}
	} else if *user < 0 {
		return errors.New("token: --user must be a positive id")
	}
	return app.WriteTokens(cfg, lo, hi, *admin, *ttl, *out, stdout)
}

func admin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, args, err := actionFlags(args, "admin", "create", "--user NAME [--password-stdin]", stderr)
	if err != nil {
		return err
	}
	user := fs.String("user", "", "the operator's user name")
	fromStdin := fs.Bool("password-stdin", false, "read the password from the first line of standard input")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *user == "" {
		return errors.New("admin create: --user NAME is required")
	}
	cfg, err := config.Load(nil)
	if err != nil {
		return err
	}
	password, err := app.ReadPassword(os.Stdin, stderr, *fromStdin)
	if err != nil {
		return fmt.Errorf("admin create: %w", err)
	}
	return app.CreateAdmin(ctx, cfg, *user, password, stdout)
}

func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts app.DemoOptions
	fs.StringVar(&opts.URL, "url", "", "the running server (default http://localhost and the port of SECKILL_HTTP_ADDR)")
	fs.IntVar(&opts.Stock, "stock", 100, "units on sale")
	fs.DurationVar(&opts.Duration, "duration", time.Hour, "how long the sale stays open from now")
	fs.Int64Var(&opts.Buyer, "buyer", 1001, "user id of the buyer in the printed commands")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("demo: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := config.Load(nil)
	if err != nil {
		return err
	}
	return app.Demo(ctx, cfg, opts, stdout)
}

func shards(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("shards: usage: seckill shards VOUCHER_ID...")
	}
	ids := make([]int64, len(args))
	for i, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return fmt.Errorf("shards: %q is not a voucher id", a)
		}
		ids[i] = id
	}
	cfg, err := config.Load(nil)
	if err != nil {
		return err
	}
	return app.CheckShards(ctx, cfg, ids, stdout)
}

func payments(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "provider" {
		return provider(ctx, args[1:], stdout, stderr)
	}
	fs, args, err := actionFlags(args, "payments", "simulate", "--order ID [--url URL] [--fail] | provider [--listen ADDR]", stderr)
	if err != nil {
		return err
	}
	url := fs.String("url", "", "the running server (default: SECKILL_HTTP_ADDR on this machine)")
	order := fs.Int64("order", 0, "the order to pay")
	payment := fs.String("payment", "", "a payment of the order opened before (a late success: no payment is opened)")
	fail := fs.Bool("fail", false, "send payment.failed instead of payment.succeeded")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(nil)
	if err != nil {
		return err
	}
	return app.SimulatePayment(ctx, cfg, app.SimulateOptions{URL: *url, OrderID: *order, PaymentID: *payment, Fail: *fail}, stdout)
}

func provider(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("payments provider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts app.ProviderOptions
	fs.StringVar(&opts.Listen, "listen", "127.0.0.1:8090", "the address to serve the refund call on (SECKILL_PAYMENT_REFUND_URL is http://ADDR/refunds)")
	fs.StringVar(&opts.Webhook, "webhook", "", "the server's payment webhook (default: /webhooks/payments at SECKILL_HTTP_ADDR on this machine)")
	fs.BoolVar(&opts.Refuse, "refuse", false, "refuse every refund (a refund.failed event), to try the failure path")
	fs.DurationVar(&opts.Delay, "delay", 200*time.Millisecond, "how long after a refund call its confirmation is sent")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("payments provider: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := config.Load(nil)
	if err != nil {
		return err
	}
	return app.RunDevProvider(ctx, cfg, opts, app.NewLogger(cfg), stdout)
}

// actionFlags checks that args start with the one action a subcommand such
// as "admin create" has, and returns the action's flag set (its errors and
// usage go to stderr) with the arguments after the action.
func actionFlags(args []string, cmd, action, usage string, stderr io.Writer) (*flag.FlagSet, []string, error) {
	if len(args) == 0 || args[0] != action {
		return nil, nil, fmt.Errorf("%s: usage: seckill %s %s %s", cmd, cmd, action, usage)
	}
	fs := flag.NewFlagSet(cmd+" "+action, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs, args[1:], nil
}
