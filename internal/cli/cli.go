// Package cli is the start-up the seckill commands share: signals, exit
// status and how a failure is printed.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Run is a command's body: it reads args and writes to stdout and stderr
// (not os.Args and os.Stdout, so tests can call it), and returns when ctx
// ends or its work is done.
type Run func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Main runs run with the process's arguments under a context that SIGINT
// and SIGTERM cancel, so the command can shut down gracefully. When run
// fails, Main prints "name: err" on stderr and exits with status 1; for
// flag.ErrHelp it prints nothing more, as the flag set showed its usage.
func Main(name string, run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, name+":", err)
		}
		os.Exit(1)
	}
}
