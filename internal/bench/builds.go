package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"seckill/internal/bench/compare"
	"seckill/internal/bench/load"
	"seckill/internal/bench/report"
)

// BaseConfig is --compare base: an older build of the seckill binary
// measured against the working tree's, each on a private Redis and
// database, with a closed-model load and the seed's burst run against each
// in turn: base first in odd rounds, head first in even ones.
type BaseConfig struct {
	Binary string // BASE's seckill binary (--base-binary); HEAD's is Fsync.SeckillBin
}

// Defaults of --compare base: five rounds of a 4 s closed load of 64
// callers and of the seed's burst take about a minute here.
const (
	DefaultBaseRounds      = 5
	DefaultBaseDuration    = 4 * time.Second
	DefaultBaseConcurrency = 64
	// MinBaseStock is the fewest units of the closed load's campaigns:
	// enough that neither build sells out, or its cheap SOLD_OUT answers
	// would flatter it.
	MinBaseStock = 100_000
	// The seed's burst: 1000 users at once for 200 units.
	seedBurstUsers = 1000
	seedBurstStock = 200
)

// validateBase checks a --compare base run's settings.
func (cfg *Config) validateBase() error {
	switch {
	case len(cfg.Compare) != 1:
		return errors.New("--compare base compares two builds on private servers: give it alone")
	case cfg.Base.Binary == "":
		return errors.New("--compare base needs --base-binary PATH: the seckill binary of BASE (make bench-compare BASE=<commit> builds it)")
	case cfg.Rate > 0:
		return errors.New("--compare base runs a closed-model load and the seed's burst: omit --rate")
	case cfg.Pay.On, cfg.Challenge != "", cfg.VoucherID != 0:
		return errors.New("--compare base creates plain campaigns on each build: omit --pay-*, --challenge and --voucher")
	}
	return nil
}

// runBuilds measures cfg.Base.Binary (BASE) against the working tree's
// seckill binary (HEAD): each on a private redis-server and database,
// started once, then round by round a closed-model load and the seed's
// burst against each (roundOrder), half a second apart.
func runBuilds(ctx context.Context, cfg Config) (*report.Result, error) {
	if err := cfg.validateBase(); err != nil {
		return nil, err
	}
	base, err := exec.LookPath(cfg.Base.Binary)
	if err != nil {
		return nil, fmt.Errorf("--base-binary: %w", err)
	}
	rounds := cmp.Or(cfg.Rounds, DefaultBaseRounds)
	closedCfg := cfg
	// Each run is one load against one build: the rounds are this loop's.
	closedCfg.Compare, closedCfg.Rounds = nil, 0
	closedCfg.Duration = cmp.Or(cfg.Duration, DefaultBaseDuration)
	closedCfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultBaseConcurrency)
	closedCfg.Stock = max(cfg.Stock, MinBaseStock)
	// Every request a buyer of its own.
	closedCfg.Users = cmp.Or(cfg.Users, int(closedCfg.Stock))
	closed, err := newRunner(ctx, closedCfg, false)
	if err != nil {
		return nil, err
	}
	burstCfg := closed.cfg
	burstCfg.Duration, burstCfg.Concurrency, burstCfg.Users, burstCfg.Stock = 0, 0, seedBurstUsers, seedBurstStock
	burst := *closed
	burst.cfg = burstCfg
	if burst.spec, err = burstCfg.spec(); err != nil {
		return nil, err
	}
	// The burst's buyers are the closed load's first thousand: each run
	// buys from a campaign of its own.
	burst.auth = closed.auth[:min(len(closed.auth), burst.spec.Users)]
	burst.spec.Users = len(burst.auth)

	head, redisBin, dir, err := closed.privateBinaries("builds")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bc := &report.Builds{BaseBinary: base, HeadBinary: head, Rounds: rounds}
	res := &report.Result{Builds: bc}
	servers := map[string]*buildServer{}
	for _, b := range []struct{ label, bin string }{{report.TargetBase, base}, {report.TargetHead, head}} {
		s, err := closed.startBuild(ctx, b.label, b.bin, redisBin, dir)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", b.label, b.bin, err)
		}
		defer s.close()
		servers[b.label] = s
	}

	loads := []*runner{closed, &burst}
	for _, r := range loads {
		bc.Loads = append(bc.Loads, report.BuildLoad{Load: r.loadInfo()})
	}
	for round := 1; round <= rounds && ctx.Err() == nil; round++ {
		for i, r := range loads {
			for _, label := range roundOrder(round) {
				if ctx.Err() != nil {
					break
				}
				// The run before this one may still be ending on its
				// server (a burst's thousand connections closing):
				// let it, so that no build pays for the other's.
				if !load.SleepUntil(ctx, time.Now().Add(buildSettle)) {
					break
				}
				s := servers[label]
				rep, err := r.runSeckill(ctx, seckillTarget{label: label, url: s.srv.URL, voucherOf: "its own database",
					databaseURL: s.dsn, redisURL: s.redis.URL})
				if err != nil {
					return res, fmt.Errorf("%s, round %d: %w", label, round, err)
				}
				rep.Round = round
				if rep.Persistence != nil {
					rep.Persistence.Note = joinNotes(s.note, rep.Persistence.Note)
				}
				bc.Loads[i].Runs = append(bc.Loads[i].Runs, rep)
			}
		}
	}
	for i := range bc.Loads {
		bc.Loads[i].Summarize(bc.Loads[i].Load.Mode)
	}
	res.Interrupted = ctx.Err() != nil
	return res, nil
}

// buildSettle is the pause before each run of --compare base: the run
// before it ends on its server after the bench has its answers (a burst's
// thousand connections close, the runtime frees what it held), and that
// work would be charged to the next run, which is the other build's.
const buildSettle = 500 * time.Millisecond

// roundOrder is the order of the builds in round (from 1): base first in
// odd rounds, head first in even ones, so that neither always runs right
// after the other (a build's first run after the other's burst, say).
func roundOrder(round int) []string {
	if round%2 == 0 {
		return []string{report.TargetHead, report.TargetBase}
	}
	return []string{report.TargetBase, report.TargetHead}
}

// buildEnv is both builds' settings: the shared limits on at rates the
// bench never reaches (as --compare limit's "limit"), so that every
// purchase pays for the checks a production server makes and none is
// refused. A build that does not know a variable ignores it.
var buildEnv = limitEnv[report.TargetLimit]

// buildServer is one build's server on its private Redis and database.
type buildServer struct {
	srv   *compare.Seckill
	redis *compare.Redis
	dsn   string
	note  string
}

// startBuild starts bin on a private redis-server (appendfsync everysec,
// as --compare limit) and an empty database: Fsync.DatabaseURLs[label],
// else seckill_bench_<label> recreated.
func (r *runner) startBuild(ctx context.Context, label, bin, redisBin, dir string) (*buildServer, error) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	dsn := r.cfg.Fsync.DatabaseURLs[label]
	if dsn == "" {
		if r.cfg.DatabaseURL == "" {
			return nil, errors.New("needs Postgres: set SECKILL_DATABASE_URL")
		}
		var err error
		if dsn, err = compare.RecreateDatabase(sctx, r.cfg.DatabaseURL, "seckill_bench_"+label); err != nil {
			return nil, err
		}
	}
	rs, err := compare.StartRedis(sctx, redisBin, dir, compare.FsyncEverysec)
	if err != nil {
		return nil, err
	}
	srv, err := compare.StartSeckill(sctx, bin, dir, append([]string{
		"SECKILL_DATABASE_URL=" + dsn, "SECKILL_REDIS_URL=" + rs.URL,
		"SECKILL_JWT_SECRET=" + r.cfg.JWTSecret, "SECKILL_JWT_ISSUER=" + r.cfg.JWTIssuer,
	}, buildEnv...))
	if err != nil {
		rs.Close()
		return nil, err
	}
	return &buildServer{srv: srv, redis: rs, dsn: dsn,
		note: fmt.Sprintf("%s serve with %s on a private redis-server, appendfsync everysec; database %s",
			bin, strings.Join(buildEnv, " "), redactDSN(dsn))}, nil
}

func (s *buildServer) close() {
	s.srv.Close()
	s.redis.Close()
}

// loadInfo describes the runner's load for the report.
func (r *runner) loadInfo() report.LoadInfo {
	spec := r.spec
	return report.LoadInfo{
		Mode: spec.Mode, Users: spec.Users, Attempts: spec.Attempts, Concurrency: spec.Concurrency,
		Rate: spec.Rate, DurationS: spec.Duration.Seconds(), RampS: spec.Ramp.Seconds(),
		MaxInFlight: spec.MaxInFlight, TimeoutS: spec.Timeout.Seconds(), Warm: spec.Warm && spec.Mode != load.ModeOpen,
		Stock: r.cfg.Stock, WaitingRoom: r.cfg.Room.On,
	}
}
