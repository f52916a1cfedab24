package seckill

import (
	"context"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// settingsTTL is how long a process reuses a campaign's challenge settings
// when issuing challenges: the refresh storm before a sale opens reads
// Postgres once a campaign and second, not once a request. Changes are
// allowed only before the sale, and a stale kind is refused by the admit
// script (which reads the live one), so a short staleness is harmless.
const settingsTTL = time.Second

// How a process reads challenge settings from Postgres: one read a
// campaign at a time, whoever waits for it (the refresh storm of one sale
// costs one read a second), at most maxSettingsReads campaigns at once (a
// caller who asks about many made-up vouchers, each a cache miss, gets
// UNAVAILABLE beyond it instead of queueing reads on the database), each
// within settingsReadTimeout.
const (
	maxSettingsReads    = 8
	settingsReadTimeout = 5 * time.Second
)

// Challenges hands buyers the challenges of the campaigns that ask for one
// (the tokens are the Challenger's; the admission script spends them).
type Challenges struct {
	store      CatalogStore // a campaign's settings and quiz
	challenger *Challenger
	now        func() time.Time
	settings   settings
}

// NewChallenges returns the challenges of the campaigns store holds, signed
// and checked by challenger; it refuses to build without them.
func NewChallenges(store CatalogStore, challenger *Challenger, now func() time.Time) (*Challenges, error) {
	if err := required("challenges", map[string]bool{"store": store == nil, "challenger": challenger == nil, "now": now == nil}); err != nil {
		return nil, err
	}
	return &Challenges{store: store, challenger: challenger, now: now}, nil
}

// settings caches campaigns' challenge settings for Challenge, and for as
// long the vouchers Postgres does not know.
type settings struct {
	mu     sync.Mutex
	m      map[int64]cachedSettings
	once   sync.Once
	reads  chan struct{} // a slot per Postgres read under way
	flight singleflight.Group
}

type cachedSettings struct {
	at      time.Time
	c       Campaign
	quiz    []QuizQuestion
	missing error // ENOTFOUND: no such campaign
}

func (c *Challenges) campaignSettings(ctx context.Context, voucherID int64) (Campaign, []QuizQuestion, error) {
	now := c.now()
	st := &c.settings
	st.once.Do(func() { st.reads = make(chan struct{}, maxSettingsReads) })
	st.mu.Lock()
	cs, ok := st.m[voucherID]
	st.mu.Unlock()
	if ok && now.Sub(cs.at) < settingsTTL && now.Sub(cs.at) >= 0 {
		return cs.c, cs.quiz, cs.missing
	}
	ch := st.flight.DoChan(strconv.FormatInt(voucherID, 10), func() (any, error) {
		// The read is shared by every caller waiting for it, so it runs
		// detached from the one that started it, who may leave first.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settingsReadTimeout)
		defer cancel()
		select {
		case st.reads <- struct{}{}:
			defer func() { <-st.reads }()
		default:
			return nil, Errorf(EUNAVAILABLE, "too many challenges asked for at once; try again in a moment")
		}
		cs, err := c.readSettings(rctx, voucherID)
		if err != nil && ErrorCode(err) != ENOTFOUND {
			return nil, err
		}
		cs.at, cs.missing = now, err
		st.mu.Lock()
		if st.m == nil || len(st.m) > 10000 {
			st.m = map[int64]cachedSettings{}
		}
		st.m[voucherID] = cs
		st.mu.Unlock()
		return cs, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return Campaign{}, nil, r.Err
		}
		cs := r.Val.(cachedSettings)
		return cs.c, cs.quiz, cs.missing
	case <-ctx.Done():
		return Campaign{}, nil, Errorf(EUNAVAILABLE, "the sale's challenge could not be read in time; try again")
	}
}

// readSettings reads a campaign's challenge settings from Postgres.
// ENOTFOUND for a voucher it does not know or one without a campaign.
func (c *Challenges) readSettings(ctx context.Context, voucherID int64) (cachedSettings, error) {
	v, err := c.store.Voucher(ctx, voucherID)
	if err != nil {
		return cachedSettings{}, err
	}
	if v.Campaign == nil {
		return cachedSettings{}, Errorf(ENOTFOUND, "voucher %d has no campaign", voucherID)
	}
	var quiz []QuizQuestion
	if v.Campaign.Challenge == ChallengeQuiz {
		if quiz, err = c.store.CampaignQuiz(ctx, voucherID); err != nil {
			return cachedSettings{}, err
		}
	}
	return cachedSettings{c: *v.Campaign, quiz: quiz}, nil
}

// Challenge hands the caller a challenge for a campaign: bound to them and
// the campaign, valid for Challenges.TTL, available from Challenges.Lead
// before the sale opens until it ends. A campaign without a challenge
// answers Kind NONE and no token. ENOTFOUND; ECONFLICT before the lead time
// or after the sale.
func (c *Challenges) Challenge(ctx context.Context, voucherID int64) (*Challenge, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return nil, err
	}
	if voucherID <= 0 {
		return nil, Errorf(ENOTFOUND, "voucher %d not found", voucherID)
	}
	camp, quiz, err := c.campaignSettings(ctx, voucherID)
	if err != nil {
		return nil, err
	}
	if camp.Challenge == ChallengeNone || camp.Challenge == "" {
		return &Challenge{Kind: ChallengeNone}, nil
	}
	now := c.now()
	if from := camp.BeginTime.Add(-c.challenger.Lead); now.Before(from) {
		return nil, Errorf(ECONFLICT, "challenges for this sale are handed out from %s", from.UTC().Format(time.RFC3339))
	}
	if !now.Before(camp.EndTime) {
		return nil, Errorf(ECONFLICT, "the sale has ended")
	}
	if camp.Challenge == ChallengeQuiz && len(quiz) == 0 {
		return nil, Errorf(EUNAVAILABLE, "the quiz of this sale has no questions yet")
	}
	ch := c.challenger.Issue(camp.Challenge, voucherID, u.ID, camp.PoWBits, quiz, now)
	return &ch, nil
}

// forget drops a campaign's cached settings (this process changed them).
func (c *Challenges) forget(voucherID int64) {
	st := &c.settings
	st.mu.Lock()
	delete(st.m, voucherID)
	st.mu.Unlock()
}
