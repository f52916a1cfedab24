package admission

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestAdmitArgvIsEvalSha: the whole call admitArgv builds for a purchase is
// word for word the EVALSHA that go-redis's Script.EvalSha sends for the
// keys (a.keys) and arguments the admit script documents, so building it by
// hand changes nothing Redis is asked; and sendArgv's EVAL fallback is
// Script.Eval of the same.
func TestAdmitArgvIsEvalSha(t *testing.T) {
	a := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:0"}), Options{Prefix: "p:",
		UserRate: 5, UserBurst: 10, AddressRate: 100, AddressBurst: 300})
	const voucher = int64(42)
	for _, tc := range []struct {
		user                int64
		nonce, addr, ticket string
		exp, addrEvery      int64
		verdict             string
	}{
		{user: 7, addr: "127.0.0.1", verdict: "1", addrEvery: a.addrEvery},
		{user: 1234567890123, addr: "2001:db8::/64", verdict: "1", addrEvery: a.addrEvery},
		{user: 9, nonce: "n0nce", ticket: "QUIZ", exp: 1767225600000, verdict: "0", addrEvery: a.addrEvery},
		{user: 3, verdict: "1"}, // no address: no address limit
	} {
		got := a.admitArgv(a.keys.admitStatics(voucher), tc.user, tc.nonce, tc.addr, tc.ticket, tc.exp, tc.addrEvery, tc.verdict)
		keys := append(a.keys.admit(voucher), a.keys.guard(voucher), a.keys.userLimit(voucher, tc.user),
			a.keys.used(voucher, tc.nonce), a.keys.brake(voucher), a.keys.addressLimit(voucher, tc.addr),
			a.keys.wrong(voucher, tc.user))
		args := []any{tc.user, a.userEvery, a.userBurst, tc.ticket, tc.exp, tc.addrEvery, a.addrBurst, tc.verdict,
			a.wrongWait, a.wrongMax, wrongKeep.Milliseconds()}
		for _, eval := range []bool{false, true} {
			var want, sent []any
			c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0"})
			c.AddHook(captureHook{&sent})
			if eval {
				want = admitScript.Eval(context.Background(), c, keys, args...).Args()
				sendArgv(context.Background(), c, admitScript, true, got)
			} else {
				want = admitScript.EvalSha(context.Background(), c, keys, args...).Args()
				sendArgv(context.Background(), c, admitScript, false, got)
			}
			c.Close()
			if fmt.Sprintf("%#v", sent) != fmt.Sprintf("%#v", want) {
				t.Errorf("eval %v: sent\n%#v\nEvalSha/Eval sends\n%#v", eval, sent, want)
			}
		}
	}
}

// captureHook records the arguments of the command a client processes and
// answers it without a server.
type captureHook struct{ args *[]any }

func (captureHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h captureHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		*h.args = cmd.Args()
		return nil
	}
}
func (captureHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAdmitStaticsBase: the base admitStatics keeps for a campaign is its
// shard 0's key base, which orderBase answers from it.
func TestAdmitStaticsBase(t *testing.T) {
	k := keys{prefix: "p:"}
	if got, want := k.admitStatics(42).base, k.shardBase(42, 0, 1); got != want {
		t.Errorf("admitStatics base %q, shard 0's base %q", got, want)
	}
}
