package admission

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Scripts are shared by every Admitter: a Script holds only its source and
// its SHA1. Each file declares the scripts it runs, with newScript, and runs
// them with runScript or runScripts: nothing else sends EVALSHA or EVAL.

// allScripts lists every script newScript made, for Load.
var allScripts []*redis.Script

func newScript(src string) *redis.Script {
	s := redis.NewScript(src)
	allScripts = append(allScripts, s)
	return s
}

// scriptCall is one run of a script: its keys and arguments.
type scriptCall struct {
	keys []string
	args []any
	// argv, when set, is the whole call as EvalSha would send it
	// ("evalsha", the SHA1, the number of keys, the keys, the arguments),
	// built by a caller that can do so with fewer allocations (the
	// admission: admitArgv); keys then holds at least the first key, which
	// routes the call, and args is unused.
	argv []any
}

// script returns c itself; a type that embeds a scriptCall (pipeCall) gets
// it too, and so can be given to runScripts as it is.
func (c scriptCall) script() scriptCall { return c }

// scriptCaller is a scriptCall, or a type that embeds one.
type scriptCaller interface{ script() scriptCall }

// runScript runs s once on c and returns its reply, as runScripts does.
func runScript(ctx context.Context, c redis.Cmdable, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	var cmd [1]*redis.Cmd
	runScripts(ctx, c, s, []scriptCall{{keys: keys, args: args}}, cmd[:])
	return cmd[0]
}

// runScripts runs s once per call on c, in one round trip, and sets cmds[i]
// to the reply of calls[i]: one call goes alone, more go as one pipeline.
// Each call is an EVALSHA (Load put the scripts in Redis). A node that lost
// its script cache (a restart, a failover to a replica that never ran the
// script, SCRIPT FLUSH) answers NOSCRIPT without running anything, so the
// calls it refused are run once more, in one more round trip, with EVAL,
// which also caches the script there for the calls after them.
//
// EVAL rather than SCRIPT LOAD and a second EVALSHA: on a cluster the calls
// of one pipeline reach several masters and only some may have lost the
// script; an EVAL goes wherever its keys are served now, needs no other node
// (a cluster client's SCRIPT LOAD goes to every shard and fails with any of
// them), and leaves no moment between a load and its use in which the node
// could lose the script again. Any other error is the call's own reply, and
// is not retried.
func runScripts[C scriptCaller](ctx context.Context, c redis.Cmdable, s *redis.Script, calls []C, cmds []*redis.Cmd) {
	sendScripts(ctx, c, s, false, calls, nil, cmds)
	var lost []int
	for i, cmd := range cmds[:len(calls)] {
		if noScript(cmd.Err()) {
			lost = append(lost, i)
		}
	}
	if len(lost) > 0 {
		sendScripts(ctx, c, s, true, calls, lost, cmds)
	}
}

// sendScripts sends the calls at positions idx (every call when idx is
// nil) as EVALSHA, or as EVAL when eval is set: alone, or as one pipeline.
func sendScripts[C scriptCaller](ctx context.Context, c redis.Cmdable, s *redis.Script, eval bool, calls []C, idx []int, cmds []*redis.Cmd) {
	send := func(sc redis.Scripter, i int) {
		call := calls[i].script()
		if call.argv != nil {
			cmds[i] = sendArgv(ctx, sc, s, eval, call.argv)
			return
		}
		if eval {
			cmds[i] = s.Eval(ctx, sc, call.keys, call.args...)
		} else {
			cmds[i] = s.EvalSha(ctx, sc, call.keys, call.args...)
		}
	}
	switch {
	case idx == nil && len(calls) == 1:
		send(c, 0)
	case len(idx) == 1:
		send(c, idx[0])
	default:
		pipe := c.Pipeline()
		if idx == nil {
			for i := range calls {
				send(pipe, i)
			}
		} else {
			for _, i := range idx {
				send(pipe, i)
			}
		}
		// Exec reports the first failed call; each call's own reply,
		// error or not, is in its Cmd, which is what callers read.
		_, _ = pipe.Exec(ctx)
	}
}

// sendArgv sends a call given as its whole EVALSHA (scriptCall.argv) on
// sc: as it is, or as Script.Eval with the same keys and arguments.
func sendArgv(ctx context.Context, sc redis.Scripter, s *redis.Script, eval bool, argv []any) *redis.Cmd {
	if eval {
		n := argv[2].(int)
		keys := make([]string, n)
		for i := range keys {
			keys[i] = argv[3+i].(string)
		}
		return s.Eval(ctx, sc, keys, argv[3+n:]...)
	}
	cmd := redis.NewCmd(ctx, argv...)
	cmd.SetFirstKeyPos(3)
	_ = sc.(processor).Process(ctx, cmd)
	return cmd
}

// processor is what every go-redis client and pipeline is: it sends a
// command as it is built.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// noScript reports whether err is Redis's NOSCRIPT: the node does not hold
// the script, and did not run it. go-redis turns it into redis.ErrNoScript
// for a call sent alone, not for one in a pipeline.
func noScript(err error) bool {
	return err != nil && (errors.Is(err, errNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// errNoScript is redis.ErrNoScript as an error once, not at every call
// (the conversion would allocate on the hot path).
var errNoScript error = redis.ErrNoScript
