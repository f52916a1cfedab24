package admission_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/seckill"
	"seckill/internal/testenv"
)

// twoAdmitters returns two Admitters sharing one Redis and key prefix, as
// two API instances do.
func twoAdmitters(tb testing.TB, opts admission.Options) (*admission.Admitter, *admission.Admitter) {
	tb.Helper()
	if opts.SoldOutTTL == 0 {
		opts.SoldOutTTL = -1
	}
	a, b, _ := twoAdmittersRaw(tb, opts)
	return a, b
}

func twoAdmittersRaw(tb testing.TB, opts admission.Options) (*admission.Admitter, *admission.Admitter, redis.UniversalClient) {
	tb.Helper()
	rdb, prefix := testenv.MustOpenRedis(tb)
	opts.Prefix = prefix
	a, b := admission.New(rdb, opts), admission.New(rdb, opts)
	if err := a.Load(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return a, b, rdb
}

// admitAtOnce runs n admissions from n goroutines released together and
// counts their outcomes.
func admitAtOnce(t *testing.T, n int, admit func(i int) (seckill.Outcome, error)) map[seckill.Outcome]int {
	t.Helper()
	var (
		mu     sync.Mutex
		counts = map[seckill.Outcome]int{}
		wg     sync.WaitGroup
		start  = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			o, err := admit(i)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			counts[o]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return counts
}

func TestAdmitChallenge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// No wait after a wrong answer here (TestAdmitWrongAnswerWait has it),
	// so that a user may try again at once.
	a, _ := newAdmitter(t, admission.Options{SoldOutTTL: -1, WrongAnswerWait: -1})
	ch := seckill.NewChallenger([]byte("test secret of at least thirty-two bytes"), time.Minute, time.Minute)
	c := liveCampaign(1, 100)
	c.Challenge, c.PoWBits = seckill.ChallengePoW, 4
	mustWarm(t, a, seckill.WarmState{Campaign: c})

	solve := func(user int64) seckill.Ticket {
		iss := ch.Issue(seckill.ChallengePoW, 1, user, 4, nil, time.Now())
		return ch.Check(seckill.ChallengeAnswer{Token: iss.Token, Solution: seckill.SolvePoW(iss.Token, 4)}, 1, user, time.Now())
	}
	goodIss := ch.Issue(seckill.ChallengePoW, 1, 7, 4, nil, time.Now())
	good := ch.Check(seckill.ChallengeAnswer{Token: goodIss.Token, Solution: seckill.SolvePoW(goodIss.Token, 4)}, 1, 7, time.Now())
	other := ch.Issue(seckill.ChallengePoW, 1, 8, 4, nil, time.Now())
	wrongOnce := ch.Issue(seckill.ChallengePoW, 1, 12, 4, nil, time.Now())
	expired := ch.Issue(seckill.ChallengePoW, 1, 9, 4, nil, time.Now().Add(-2*time.Minute))
	quizOfAnother := ch.Issue(seckill.ChallengeQuiz, 1, 10, 0, []seckill.QuizQuestion{{Question: "2+2?", Answers: []string{"4"}}}, time.Now())

	tests := []struct {
		name   string
		user   int64
		ticket seckill.Ticket
		want   seckill.Outcome
	}{
		{"no answer", 1, seckill.Ticket{}, seckill.OutcomeChallengeRequired},
		{"a good answer", 7, good, seckill.OutcomeAccepted},
		{"the same answer again", 7, good, seckill.OutcomeChallengeUsed},
		{"a wrong answer to the used token", 7, ch.Check(seckill.ChallengeAnswer{Token: goodIss.Token, Solution: "x"}, 1, 7, time.Now()), seckill.OutcomeChallengeUsed},
		{"a wrong counter", 8, ch.Check(seckill.ChallengeAnswer{Token: other.Token, Solution: "x"}, 1, 8, time.Now()), seckill.OutcomeChallengeWrong},
		// The first answer spends the token, right or wrong: a second one
		// hears that it was used, whatever it says.
		{"a wrong answer", 12, ch.Check(seckill.ChallengeAnswer{Token: wrongOnce.Token, Solution: "x"}, 1, 12, time.Now()), seckill.OutcomeChallengeWrong},
		{"the right answer after a wrong one", 12, ch.Check(seckill.ChallengeAnswer{Token: wrongOnce.Token, Solution: seckill.SolvePoW(wrongOnce.Token, 4)}, 1, 12, time.Now()), seckill.OutcomeChallengeUsed},
		{"another user's token", 2, ch.Check(seckill.ChallengeAnswer{Token: other.Token, Solution: seckill.SolvePoW(other.Token, 4)}, 1, 2, time.Now()), seckill.OutcomeChallengeNotYours},
		{"an expired token", 9, ch.Check(seckill.ChallengeAnswer{Token: expired.Token, Solution: seckill.SolvePoW(expired.Token, 4)}, 1, 9, time.Now()), seckill.OutcomeChallengeExpired},
		{"a forged token", 3, ch.Check(seckill.ChallengeAnswer{Token: "eyJ9.AAAA", Solution: "1"}, 1, 3, time.Now()), seckill.OutcomeChallengeWrong},
		{"a quiz answer for a proof-of-work sale", 10, ch.Check(seckill.ChallengeAnswer{Token: quizOfAnother.Token, Solution: "4"}, 1, 10, time.Now()), seckill.OutcomeChallengeWrong},
		// The process's clock said it was valid, Redis's says it expired.
		{"a token expired by Redis's clock", 13, seckill.Ticket{Kind: seckill.ChallengePoW, Nonce: "late",
			ExpiresAt: time.Now().Add(-time.Second)}, seckill.OutcomeChallengeExpired},
		{"another good answer", 11, solve(11), seckill.OutcomeAccepted},
	}
	for _, tt := range tests {
		got, _, err := a.Admit(ctx, 1, tt.user, tt.ticket)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
	if rem, _ := a.Remaining(ctx, []int64{1}); rem[1] != 98 {
		t.Errorf("remaining %d, want 98: only the two good answers take stock", rem[1])
	}

	// The operator turns the challenge off: no answer is needed.
	if err := a.UpdateGuard(ctx, 1, seckill.ChallengeNone, 0); err != nil {
		t.Fatal(err)
	}
	if o, _ := mustAdmit(t, a, 1, 1); o != seckill.OutcomeAccepted {
		t.Errorf("after the challenge is off: %s, want ACCEPTED", o)
	}
}

// One answer sent at once by hundreds of goroutines through two Admitters
// (two instances) is used once: one attempt goes on to the stock, every
// other is told the answer was used.
func TestAdmitChallengeUsedOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoAdmitters(t, admission.Options{})
	ch := seckill.NewChallenger([]byte("test secret of at least thirty-two bytes"), time.Minute, time.Minute)
	c := liveCampaign(1, 100)
	c.Challenge = seckill.ChallengeQuiz
	mustWarm(t, a, seckill.WarmState{Campaign: c})
	iss := ch.Issue(seckill.ChallengeQuiz, 1, 5, 0, []seckill.QuizQuestion{{Question: "Capital of France?", Answers: []string{"Paris"}}}, time.Now())
	ticket := ch.Check(seckill.ChallengeAnswer{Token: iss.Token, Solution: "  paris "}, 1, 5, time.Now())
	if ticket.Refusal != "" {
		t.Fatalf("a right answer refused: %s", ticket.Refusal)
	}

	const n = 400
	counts := admitAtOnce(t, n, func(i int) (seckill.Outcome, error) {
		o, _, err := []*admission.Admitter{a, b}[i%2].Admit(ctx, 1, 5, ticket)
		return o, err
	})
	want := map[seckill.Outcome]int{seckill.OutcomeAccepted: 1, seckill.OutcomeChallengeUsed: n - 1}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
}

// One user sending 200 attempts a second to two instances gets through only
// as many as the one shared limit allows.
func TestAdmitUserLimitShared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const rate, burst = 5, 10
	a, b := twoAdmitters(t, admission.Options{UserRate: rate, UserBurst: burst})
	mustWarm(t, a, seckill.WarmState{Campaign: liveCampaign(1, 100)})

	const perSecond, seconds = 200, 1.5
	var (
		mu      sync.Mutex
		passed  int
		limited int
		wg      sync.WaitGroup
	)
	begin := time.Now()
	tick := time.NewTicker(time.Second / perSecond)
	defer tick.Stop()
	for i := 0; i < int(perSecond*seconds); i++ {
		<-tick.C
		adm := a
		if i%2 == 1 {
			adm = b
		}
		wg.Go(func() {
			o, _, err := adm.Admit(ctx, 1, 42, seckill.Ticket{})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if o == seckill.OutcomeRateLimited {
				limited++
			} else {
				passed++ // ACCEPTED once, then ALREADY_PURCHASED: both passed the limit
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin).Seconds()
	most := burst + int(rate*elapsed) + 1
	if passed < burst || passed > most {
		t.Errorf("%d attempts passed the limit in %.2fs (%d limited), want %d to %d", passed, elapsed, limited, burst, most)
	}
}

// The brake bounds admissions a second without touching stock.
func TestAdmitBrake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoAdmitters(t, admission.Options{})
	c := liveCampaign(1, 1000)
	c.Brake = 20 // bursts of 2
	mustWarm(t, a, seckill.WarmState{Campaign: c})

	counts := admitAtOnce(t, 300, func(u int) (seckill.Outcome, error) {
		o, _, err := []*admission.Admitter{a, b}[u%2].Admit(ctx, 1, int64(u+1), seckill.Ticket{})
		return o, err
	})
	// 300 attempts at once take far less than a second: the burst (2) and
	// at most a few more as time passes.
	if acc := counts[seckill.OutcomeAccepted]; acc < 2 || acc > 10 || counts[seckill.OutcomeRateLimited]+acc != 300 {
		t.Errorf("outcomes %v: want 2 to 10 ACCEPTED and the rest RATE_LIMITED", counts)
	}
	rem, _ := a.Remaining(ctx, []int64{1})
	if rem[1] != 1000-int64(counts[seckill.OutcomeAccepted]) {
		t.Errorf("remaining %d after %d admissions: a braked attempt took stock", rem[1], counts[seckill.OutcomeAccepted])
	}
}

// A campaign rebuilt from Postgres keeps its challenge: the guard is
// written before the campaign admits again.
func TestGuardSurvivesEmptyRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := newAdmitter(t, admission.Options{SoldOutTTL: -1})
	c := liveCampaign(1, 10)
	c.Challenge, c.PoWBits = seckill.ChallengePoW, 8
	mustWarm(t, a, seckill.WarmState{Campaign: c})
	if err := a.Forget(ctx, 1); err != nil { // Redis lost everything of it
		t.Fatal(err)
	}
	mustWarm(t, a, seckill.WarmState{Campaign: c})
	if o, _ := mustAdmit(t, a, 1, 1); o != seckill.OutcomeChallengeRequired {
		t.Errorf("after a rewarm: %s, want CHALLENGE_REQUIRED", o)
	}
}

// Before the opening, a process answers NOT_STARTED from its memory of the
// window, without Redis, until the sale opens or the window changes.
func TestAdmitWindowFromMemory(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b, rdb := twoAdmittersRaw(t, admission.Options{})
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := liveCampaign(1, 10)
	c.BeginTime, c.EndTime = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
	mustWarm(t, a, seckill.WarmState{Campaign: c})
	for range 2 { // the first answer creates the process's state of the campaign, the second marks it
		if o, _ := mustAdmit(t, a, 1, 1); o != seckill.OutcomeNotStarted {
			t.Fatalf("before the opening: %s", o)
		}
	}
	// Take the campaign away from Redis: asking it would fail.
	key := admission.CampaignKey(a, 1)
	if err := rdb.Rename(ctx, key, key+":away").Err(); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if o, _ := mustAdmit(t, a, 1, 1); o != seckill.OutcomeNotStarted {
			t.Fatalf("from memory: %s, want NOT_STARTED", o)
		}
	}
	if err := rdb.Rename(ctx, key+":away", key).Err(); err != nil {
		t.Fatal(err)
	}
	// Another instance opens the sale now: this one hears it at once.
	if err := b.UpdateCampaign(ctx, 1, time.Now().Add(-time.Second), c.EndTime, false); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		o, _ := mustAdmit(t, a, 1, 2)
		if o == seckill.OutcomeAccepted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the window changed: still %s", o)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Each wrong answer to a campaign's challenge makes its user wait, twice as
// long as the one before up to the longest wait; while they wait, every
// attempt of theirs at the campaign is RATE_LIMITED with what is left,
// before their token is looked at (so it is not spent) and before anything
// is taken from their limit. Other users and other campaigns do not wait.
func TestAdmitWrongAnswerWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Waits long enough that the attempts made while waiting fit in the
	// shortest on a loaded machine, where they can take a few hundred ms.
	const base, longest = 600 * time.Millisecond, 2 * time.Second
	// A burst of six: enough for the five attempts that count (four wrong
	// answers and the purchase), not for the dozen refused while waiting.
	a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: -1, WrongAnswerWait: base, WrongAnswerWaitMax: longest,
		UserRate: 0.1, UserBurst: 6})
	ch := seckill.NewChallenger([]byte("test secret of at least thirty-two bytes"), time.Minute, time.Minute)
	quiz := []seckill.QuizQuestion{{Question: "2+2?", Answers: []string{"4"}}}
	for _, id := range []int64{1, 2} {
		c := liveCampaign(id, 100)
		c.Challenge = seckill.ChallengeQuiz
		mustWarm(t, a, seckill.WarmState{Campaign: c})
	}
	issue := func(voucher, user int64) seckill.Challenge {
		return ch.Issue(seckill.ChallengeQuiz, voucher, user, 0, quiz, time.Now())
	}
	admit := func(voucher, user int64, tok seckill.Challenge, solution string) (seckill.Outcome, time.Duration) {
		t.Helper()
		o, adm, err := a.Admit(ctx, voucher, user, ch.Check(seckill.ChallengeAnswer{Token: tok.Token, Solution: solution}, voucher, user, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		return o, adm.RetryAfter
	}

	var waits []time.Duration
	for n := 1; n <= 4; n++ {
		o, wait := admit(1, 7, issue(1, 7), "5")
		if o != seckill.OutcomeChallengeWrong {
			t.Fatalf("wrong answer %d: %s", n, o)
		}
		if want := seckill.WrongAnswerWait(n, base, longest); wait != want {
			t.Errorf("wait after wrong answer %d: %v, want %v", n, wait, want)
		}
		waits = append(waits, wait)
		// Waiting: refused before the token is looked at, so a good token
		// survives it; no answer, a forged token, the same.
		good := issue(1, 7)
		for _, try := range []struct {
			name string
			tok  seckill.Challenge
			sol  string
		}{{"a right answer", good, "4"}, {"a forged token", seckill.Challenge{Token: "eyJ9.AAAA"}, "4"}} {
			o, left := admit(1, 7, try.tok, try.sol)
			if o != seckill.OutcomeRateLimited || left <= 0 || left > wait {
				t.Errorf("wrong answer %d, then %s while waiting: %s, retry after %v (the wait was %v)", n, try.name, o, left, wait)
			}
		}
		if o, _ := mustAdmit(t, a, 1, 7); o != seckill.OutcomeRateLimited {
			t.Errorf("no answer while waiting: %s", o)
		}
		// Nobody else waits: another user here, this user elsewhere.
		if o, _ := mustAdmit(t, a, 1, 8); o != seckill.OutcomeChallengeRequired {
			t.Errorf("another user while user 7 waits: %s", o)
		}
		if o, _ := mustAdmit(t, a, 2, 7); o != seckill.OutcomeChallengeRequired {
			t.Errorf("user 7 at another campaign: %s", o)
		}
		time.Sleep(wait + 20*time.Millisecond)
		if n == 4 {
			// The token kept through the waits still buys; its burst of
			// three was not spent on the refusals.
			if o, _ := admit(1, 7, good, "4"); o != seckill.OutcomeAccepted {
				t.Errorf("the token kept through the wait, after it: %s", o)
			}
		}
	}
	if want := []time.Duration{600 * time.Millisecond, 1200 * time.Millisecond, 2 * time.Second, 2 * time.Second}; !cmp.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}

	// The count goes on its own, an hour after the wait ends.
	key := admission.WrongKey(a, 1, 7)
	ttl, err := rdb.PTTL(ctx, key).Result()
	if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("the wrong answers' key lives %v (%v), want about an hour", ttl, err)
	}
	size, err := rdb.MemoryUsage(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a user's wrong answers take %d bytes of Redis (MEMORY USAGE of %s)", size, key)
	if size > 200 {
		t.Errorf("a user's wrong answers take %d bytes", size)
	}

	// A campaign without a challenge never reads the key.
	plain := liveCampaign(3, 10)
	mustWarm(t, a, seckill.WarmState{Campaign: plain})
	if err := rdb.HSet(ctx, admission.WrongKey(a, 3, 7), "n", 9, "until", time.Now().Add(time.Hour).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	if o, _ := mustAdmit(t, a, 3, 7); o != seckill.OutcomeAccepted {
		t.Errorf("a campaign without a challenge: %s", o)
	}
}

// A wrong answer to a campaign without a challenge, or the wait turned off,
// makes nobody wait.
func TestAdmitWrongAnswerNoWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: -1, WrongAnswerWait: -1})
	ch := seckill.NewChallenger([]byte("test secret of at least thirty-two bytes"), time.Minute, time.Minute)
	c := liveCampaign(1, 100)
	c.Challenge, c.PoWBits = seckill.ChallengePoW, 4
	mustWarm(t, a, seckill.WarmState{Campaign: c})
	tok := ch.Issue(seckill.ChallengePoW, 1, 7, 4, nil, time.Now())
	o, adm, err := a.Admit(ctx, 1, 7, ch.Check(seckill.ChallengeAnswer{Token: tok.Token, Solution: "x"}, 1, 7, time.Now()))
	if err != nil || o != seckill.OutcomeChallengeWrong || adm.RetryAfter != 0 {
		t.Fatalf("a wrong answer without the wait: %s, retry after %v, %v", o, adm.RetryAfter, err)
	}
	// The token is spent all the same.
	o, _, err = a.Admit(ctx, 1, 7, ch.Check(seckill.ChallengeAnswer{Token: tok.Token, Solution: seckill.SolvePoW(tok.Token, 4)}, 1, 7, time.Now()))
	if err != nil || o != seckill.OutcomeChallengeUsed {
		t.Errorf("its right answer after: %s, %v", o, err)
	}
	if n, err := rdb.Exists(ctx, admission.WrongKey(a, 1, 7)).Result(); err != nil || n != 0 {
		t.Errorf("a wrong answers' key without the wait: %d, %v", n, err)
	}
}

// TestSoldOutBeforeLimitsAndGuards: a sold-out campaign refuses in Redis
// before the shared limits, the waiting room and the challenge, as the
// process's sold-out mark refuses without Redis: the refusal takes no
// attempt from the user's or the address's limit, spends no challenge
// token, and asks for no pass; a buyer still hears ALREADY_PURCHASED. Once
// a unit comes back, the limits, the room and the challenge apply again.
func TestSoldOutBeforeLimitsAndGuards(t *testing.T) {
	t.Parallel()
	ch := seckill.NewChallenger([]byte("test secret of at least thirty-two bytes"), time.Minute, time.Minute)
	for _, guard := range []string{"none", "challenge", "room"} {
		t.Run(guard, func(t *testing.T) {
			t.Parallel()
			// One attempt a minute for each user and for the address.
			a, rdb := newAdmitter(t, admission.Options{SoldOutTTL: -1, WrongAnswerWait: -1,
				UserRate: 1.0 / 60, UserBurst: 1, AddressRate: 1.0 / 60, AddressBurst: 1})
			ctx := seckill.NewContextWithClientAddr(context.Background(), "198.51.100.9")
			c := liveCampaign(1, 1)
			solved := func(user int64) seckill.Ticket { return seckill.Ticket{} }
			switch guard {
			case "challenge":
				c.Challenge, c.PoWBits = seckill.ChallengePoW, 4
				solved = func(user int64) seckill.Ticket {
					iss := ch.Issue(seckill.ChallengePoW, 1, user, 4, nil, time.Now())
					return ch.Check(seckill.ChallengeAnswer{Token: iss.Token, Solution: seckill.SolvePoW(iss.Token, 4)}, 1, user, time.Now())
				}
			case "room":
				c.Room = seckill.WaitingRoom{OpensBefore: time.Minute, AdmitPerSecond: 10, PassFor: time.Minute}
				solved = func(int64) seckill.Ticket { return seckill.Ticket{Pass: seckill.PassValid} }
			}
			mustWarm(t, a, seckill.WarmState{Campaign: c})
			admit := func(user int64, tk seckill.Ticket) (seckill.Outcome, seckill.Admission) {
				t.Helper()
				o, adm, err := a.Admit(ctx, 1, user, tk)
				if err != nil {
					t.Fatal(err)
				}
				return o, adm
			}
			// The buyer takes the address's one attempt.
			o, adm := admit(1, solved(1))
			if o != seckill.OutcomeAccepted {
				t.Fatalf("the first purchase: %s", o)
			}
			addrKey := admission.AddressLimitKey(a, 1, "198.51.100.9")
			addrCell := rdb.Get(ctx, addrKey).Val()
			if addrCell == "" {
				t.Fatal("the admission took nothing from the address's limit")
			}
			// Sold out: every attempt, answered or not, of anyone from the
			// address, hears SOLD_OUT, again and again; the buyer hears
			// ALREADY_PURCHASED.
			for i := range 5 {
				for _, tk := range []seckill.Ticket{{}, solved(2)} {
					if o, _ := admit(2, tk); o != seckill.OutcomeSoldOut {
						t.Fatalf("attempt %d of user 2 with %+v: %s, want SOLD_OUT", i, tk, o)
					}
				}
				if o, _ := admit(1, seckill.Ticket{}); o != seckill.OutcomeAlreadyPurchased {
					t.Fatalf("attempt %d of the buyer: %s, want ALREADY_PURCHASED", i, o)
				}
			}
			if got := rdb.Get(ctx, addrKey).Val(); got != addrCell {
				t.Errorf("the sold-out refusals took from the address's limit: %q, then %q", addrCell, got)
			}
			for _, u := range []int64{1, 2} {
				if n := rdb.Exists(ctx, admission.UserLimitKey(a, 1, u)).Val(); n != 0 {
					t.Errorf("the sold-out refusals took from user %d's limit", u)
				}
			}
			// A unit comes back: the address has no attempt left this minute.
			release(t, a, adm)
			if o, _ := admit(2, solved(2)); o != seckill.OutcomeRateLimited {
				t.Errorf("user 2 after the unit came back: %s, want RATE_LIMITED (the address's limit)", o)
			}
		})
	}
}
