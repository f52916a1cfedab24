package bench_test

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"seckill/internal/bench"
)

// TestWaitingRoom runs 200 buyers through a waiting room of 100 turns a
// second into a sale of 50 units on the real server: each joins before the
// open, waits for their turn and buys with its pass. Exactly 50 orders,
// none without a pass, the purchases spread over the turns, and the line
// is fair: join time and place are uncorrelated (|rho| within four
// standard errors).
func TestWaitingRoom(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	endpoint, dsn, redisURL := newServer(t)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := bench.Run(ctx, bench.Config{
		URL: endpoint, Users: 200, Stock: 50,
		Room:      bench.RoomConfig{On: true, Rate: 100, Opens: 4 * time.Second, Pass: 10 * time.Second},
		JWTSecret: secret, JWTIssuer: "seckill",
		DatabaseURL: dsn, RedisURL: redisURL, PersistTimeout: 30 * time.Second, Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	r := res.Runs[0]
	if !r.OK {
		t.Errorf("verdict: %s", r.Verdict)
	}
	p := r.Persistence
	if r.Accepted != 50 || p == nil || p.Rows != 50 || !p.Complete || p.Lost != 0 || p.Unexpected != 0 {
		t.Errorf("accepted %d, persistence %+v", r.Accepted, p)
	}
	rm := r.Room
	if rm == nil {
		t.Fatal("no waiting room in the report")
	}
	// A join slow to reach Redis may land after the open (its clock
	// decides): a few, and dozens on a machine loaded many times over.
	if rm.Joined != 200 || rm.JoinedBeforeOpen < 100 || rm.Failed != 0 || rm.AcceptedWithoutTurn != 0 {
		t.Errorf("room: %+v", rm)
	}
	// Everyone was let through or heard that the sale sold out first.
	if rm.LetThrough < 50 || rm.LetThrough+rm.SoldOut+rm.Missed != 200 {
		t.Errorf("let through %d, sold out %d, missed %d of 200", rm.LetThrough, rm.SoldOut, rm.Missed)
	}
	// They leave just after the open, before the stock can sell out; on a
	// loaded machine a late one may hear SOLD_OUT (that layer comes first).
	var probes int64
	for _, n := range rm.NoPass {
		probes += n
	}
	if probes != 10 || rm.NoPass["PASS_REQUIRED"] < 5 || rm.NoPass["ACCEPTED"] != 0 {
		t.Errorf("purchases without a pass: %v (%s)", rm.NoPass, rm.NoPassError)
	}
	// A buyer learns their place from the first status after the draw; one
	// told SOLD_OUT first (a slow answer on a loaded machine) never does.
	f := rm.Fairness
	if f.N < int(rm.JoinedBeforeOpen)/2 || math.Abs(f.Rho) >= 4/math.Sqrt(float64(f.N-1)) {
		t.Errorf("fairness: rho %.3f over %d joiners (se %.3f)", f.Rho, f.N, f.SE)
	}
	var purchases, accepted int64
	for _, s := range rm.PerSecond {
		purchases += s.Purchases
		accepted += s.Accepted
		if s.Second < 0 {
			t.Errorf("a purchase left %d s before the sale", -s.Second)
		}
	}
	if purchases != rm.LetThrough || accepted != 50 {
		t.Errorf("per second: %d purchases, %d accepted; %+v", purchases, accepted, rm.PerSecond)
	}
	if !strings.Contains(progress.String(), "[####################] 100%") {
		t.Errorf("the progress never reached 100%% (buyers who sent nothing count as done): %q", progress.String())
	}
	for _, want := range []string{"seckill-bench: 200 users through a waiting room, each buying once at their turn, stock 50", "waiting room seckill: opens 4.00 s before the sale, 100 turns a second", "fairness: Spearman's rho", "purchases with a pass by second of the sale"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q", want)
		}
	}
}
