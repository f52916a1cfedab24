package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"seckill/internal/seckill"
	"seckill/web/views"
)

// A campaign's challenge and brake: shown on its page, changed by one form.

func (h *Handler) guardView(ctx context.Context, v *seckill.Voucher, now time.Time) views.GuardView {
	c := v.Campaign
	g := views.GuardView{
		ID: v.ID, Challenge: string(c.Challenge), PoWBits: c.PoWBits, Brake: c.Brake,
		UserLimit:    h.userLimit(),
		AddressLimit: h.addressLimit(),
		ChallengeRO:  !now.Before(c.BeginTime), Ended: !now.Before(c.EndTime),
	}
	if g.Challenge == "" {
		g.Challenge = string(seckill.ChallengeNone)
	}
	if g.PoWBits == 0 {
		g.PoWBits = seckill.DefaultPoWBits
	}
	if c.Challenge == seckill.ChallengeQuiz {
		if qs, err := h.cfg.Campaigns.CampaignQuiz(ctx, v.ID); err == nil {
			g.Quiz, g.Questions = formatQuiz(qs), len(qs)
		}
	}
	return g
}

func (h *Handler) userLimit() string {
	if h.cfg.UserRate <= 0 {
		return "none"
	}
	return fmt.Sprintf("%g attempts a second per user, bursts of %d (every instance together)", h.cfg.UserRate, max(h.cfg.UserBurst, 1))
}

func (h *Handler) addressLimit() string {
	if h.cfg.AddressRate <= 0 {
		return "none"
	}
	return fmt.Sprintf("%g attempts a second per client address (IPv6: per /64), bursts of %d (every instance together)",
		h.cfg.AddressRate, max(h.cfg.AddressBurst, 1))
}

// formatQuiz writes questions one a line: "question | answer | answer" for
// a free answer, "question | *right | wrong | wrong | wrong" for one with
// choices, the accepted ones starred.
func formatQuiz(qs []seckill.QuizQuestion) string {
	var b strings.Builder
	for _, q := range qs {
		b.WriteString(q.Question)
		parts := q.Answers
		if len(q.Choices) > 0 {
			accepted := map[string]bool{}
			for _, a := range q.Answers {
				accepted[seckill.NormalizeAnswer(a)] = true
			}
			parts = make([]string, len(q.Choices))
			for i, c := range q.Choices {
				parts[i] = c
				if accepted[seckill.NormalizeAnswer(c)] {
					parts[i] = choiceMark + c
				}
			}
		}
		for _, p := range parts {
			b.WriteString(" | ")
			b.WriteString(p)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// choiceMark starts an accepted choice in the quiz field: a line with one
// lists choices, the starred ones accepted; a line without lists the
// accepted free answers.
const choiceMark = "*"

// parseQuiz reads what formatQuiz writes; blank lines are skipped. Each
// line needs a question and at least one answer; the domain checks sizes
// and choices.
func parseQuiz(s string) ([]seckill.QuizQuestion, error) {
	var qs []seckill.QuizQuestion
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if len(qs) == seckill.MaxQuizQuestions {
			return nil, seckill.Invalidf("quiz", "at most %d questions", seckill.MaxQuizQuestions)
		}
		parts := strings.Split(line, "|")
		if len(parts) < 2 {
			return nil, seckill.Invalidf("quiz", "line %d: write the question, then | and each accepted answer", i+1)
		}
		q := seckill.QuizQuestion{Question: strings.TrimSpace(parts[0])}
		var items []string
		choices := false
		for _, a := range parts[1:] {
			if a = strings.TrimSpace(a); a != "" {
				items = append(items, a)
				choices = choices || strings.HasPrefix(a, choiceMark)
			}
		}
		for _, a := range items {
			if !choices {
				q.Answers = append(q.Answers, a)
				continue
			}
			c, right := strings.CutPrefix(a, choiceMark)
			c = strings.TrimSpace(c)
			q.Choices = append(q.Choices, c)
			if right {
				q.Answers = append(q.Answers, c)
			}
		}
		qs = append(qs, q)
	}
	return qs, nil
}

func (h *Handler) updateGuard(w http.ResponseWriter, r *http.Request) {
	form := views.GuardView{
		Challenge:    r.PostFormValue("challenge"),
		Quiz:         r.PostFormValue("quiz"),
		UserLimit:    h.userLimit(),
		AddressLimit: h.addressLimit(),
	}
	h.act(w, r, "guard", func(ctx context.Context, id int64) (*seckill.Voucher, error) {
		form.ID = id
		e := seckill.GuardEdit{Challenge: seckill.ChallengeKind(form.Challenge)}
		var err error
		// The bits count only for PROOF_OF_WORK: what the field holds for
		// another kind is ignored, as on the create form.
		if e.Challenge == seckill.ChallengePoW {
			if e.PoWBits, err = formOptInt(r, "powBits"); err != nil {
				return nil, h.guardRefused(&form, err)
			}
		}
		if e.Brake, err = formInt(r, "brake", 0); err != nil {
			return nil, h.guardRefused(&form, err)
		}
		form.PoWBits, form.Brake = seckill.DefaultPoWBits, e.Brake
		if e.PoWBits != nil {
			form.PoWBits = *e.PoWBits
		}
		if e.Challenge == seckill.ChallengeQuiz {
			if e.Quiz, err = parseQuiz(form.Quiz); err != nil {
				return nil, h.guardRefused(&form, err)
			}
		}
		v, err := h.cfg.Campaigns.UpdateGuard(ctx, id, e)
		if err != nil {
			return nil, h.guardRefused(&form, err)
		}
		return v, nil
	}, func(st *pageState) {
		if form.Error == "" { // not the operator's input: say why, as other actions do
			form.Error = st.err
		}
		st.guard, st.err = &form, ""
	})
}

// guardRefused keeps the refusal on the form, next to its field.
func (h *Handler) guardRefused(form *views.GuardView, err error) error {
	form.Error, form.Field = seckill.ErrorMessage(err), seckill.ErrorField(err)
	return err
}

// formOptInt reads an optional whole number field: nil when empty, so the
// domain takes its default; a number given, 0 included, is checked as given.
func formOptInt(r *http.Request, name string) (*int, error) {
	if strings.TrimSpace(r.PostFormValue(name)) == "" {
		return nil, nil
	}
	n, err := formInt(r, name, 0)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// formInt reads a whole number field; empty is def.
func formInt(r *http.Request, name string, def int) (int, error) {
	raw := strings.TrimSpace(r.PostFormValue(name))
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		return 0, seckill.Invalidf(name, "%s must be a whole number", name)
	}
	return n, nil
}
