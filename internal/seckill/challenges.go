package seckill

import (
	"context"
	"sync"
	"time"
)

// settingsTTL is how long a process reuses a campaign's challenge settings
// when issuing challenges: the refresh storm before a sale opens reads
// Postgres once a campaign and second, not once a request. Changes are
// allowed only before the sale, and a stale kind is refused by the admit
// script (which reads the live one), so a short staleness is harmless.
const settingsTTL = time.Second

// settings caches campaigns' challenge settings for Challenge.
type settings struct {
	mu sync.Mutex
	m  map[int64]cachedSettings
}

type cachedSettings struct {
	at   time.Time
	c    Campaign
	quiz []QuizQuestion
}

func (s *Service) campaignSettings(ctx context.Context, voucherID int64) (Campaign, []QuizQuestion, error) {
	now := s.now()
	s.settings.mu.Lock()
	cs, ok := s.settings.m[voucherID]
	s.settings.mu.Unlock()
	if ok && now.Sub(cs.at) < settingsTTL && now.Sub(cs.at) >= 0 {
		return cs.c, cs.quiz, nil
	}
	v, err := s.Store.Voucher(ctx, voucherID)
	if err != nil {
		return Campaign{}, nil, err
	}
	if v.Campaign == nil {
		return Campaign{}, nil, Errorf(ENOTFOUND, "voucher %d has no campaign", voucherID)
	}
	var quiz []QuizQuestion
	if v.Campaign.Challenge == ChallengeQuiz {
		if quiz, err = s.Store.CampaignQuiz(ctx, voucherID); err != nil {
			return Campaign{}, nil, err
		}
	}
	s.settings.mu.Lock()
	if s.settings.m == nil || len(s.settings.m) > 10000 {
		s.settings.m = map[int64]cachedSettings{}
	}
	s.settings.m[voucherID] = cachedSettings{at: now, c: *v.Campaign, quiz: quiz}
	s.settings.mu.Unlock()
	return *v.Campaign, quiz, nil
}

// Challenge hands the caller a challenge for a campaign: bound to them and
// the campaign, valid for Challenges.TTL, available from Challenges.Lead
// before the sale opens until it ends. A campaign without a challenge
// answers Kind NONE and no token. ENOTFOUND; ECONFLICT before the lead time
// or after the sale.
func (s *Service) Challenge(ctx context.Context, voucherID int64) (*Challenge, error) {
	u, err := requireUser(ctx)
	if err != nil {
		return nil, err
	}
	if voucherID <= 0 {
		return nil, Errorf(ENOTFOUND, "voucher %d not found", voucherID)
	}
	c, quiz, err := s.campaignSettings(ctx, voucherID)
	if err != nil {
		return nil, err
	}
	if c.Challenge == ChallengeNone || c.Challenge == "" {
		return &Challenge{Kind: ChallengeNone}, nil
	}
	if s.Challenges == nil {
		return nil, Errorf(EUNAVAILABLE, "challenges are not available")
	}
	now := s.now()
	if from := c.BeginTime.Add(-s.Challenges.Lead); now.Before(from) {
		return nil, Errorf(ECONFLICT, "challenges for this sale are handed out from %s", from.UTC().Format(time.RFC3339))
	}
	if !now.Before(c.EndTime) {
		return nil, Errorf(ECONFLICT, "the sale has ended")
	}
	if c.Challenge == ChallengeQuiz && len(quiz) == 0 {
		return nil, Errorf(EUNAVAILABLE, "the quiz of this sale has no questions yet")
	}
	ch := s.Challenges.Issue(c.Challenge, voucherID, u.ID, c.PoWBits, quiz, now)
	return &ch, nil
}

// forget drops a campaign's cached settings (this process changed them).
func (st *settings) forget(voucherID int64) {
	st.mu.Lock()
	delete(st.m, voucherID)
	st.mu.Unlock()
}

// CampaignQuiz returns a campaign's quiz questions with their accepted
// answers. Admins only.
func (s *Service) CampaignQuiz(ctx context.Context, voucherID int64) ([]QuizQuestion, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	return s.Store.CampaignQuiz(ctx, voucherID)
}
