package web_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/seckill"
	"seckill/web"
)

// TestBalancePanel shows each state of the domain's balance on the
// campaign's live fragment: the state, the sign between the two sides and
// the message that says why.
func TestBalancePanel(t *testing.T) {
	tests := []struct {
		name string
		live seckill.LiveCounts
		t    seckill.CampaignTotals
		want panel
	}{
		{"ok", seckill.LiveCounts{Remaining: 5, Queued: 1, Known: true}, seckill.CampaignTotals{InitialStock: 10, Stock: 6, Awaiting: 3, Paid: 1},
			panel{"ok", "=", ""}},
		{"settling", seckill.LiveCounts{Remaining: 5, Queued: 2, Known: true}, seckill.CampaignTotals{InitialStock: 10, Stock: 5, Awaiting: 3, Paid: 2},
			panel{"settling", "≠", "2 orders were persisted while the numbers were read, so they count as queued and awaiting payment at once."}},
		{"surplus", seckill.LiveCounts{Remaining: 7, Known: true}, seckill.CampaignTotals{InitialStock: 10, Stock: 5, Awaiting: 3, Paid: 2},
			panel{"mismatch", "≠", "Redis and Postgres together hold 2 units more than were put on sale."}},
		{"shortfall", seckill.LiveCounts{Remaining: 4, Known: true}, seckill.CampaignTotals{InitialStock: 10, Stock: 5, Awaiting: 3, Paid: 2},
			panel{"mismatch", "≠", "1 units put on sale are neither left, queued, awaiting payment nor paid (a unit given back in Postgres that Redis has not taken yet shows so until the reconciler's sweep returns it)."}},
		{"Postgres off", seckill.LiveCounts{Remaining: 5, Known: true}, seckill.CampaignTotals{InitialStock: 10, Stock: 3, Awaiting: 3, Paid: 2},
			panel{"mismatch", "=", "Postgres disagrees with itself: 5 orders await payment or are paid but the stock says 7 units are taken."}},
		{"unknown", seckill.LiveCounts{}, seckill.CampaignTotals{InitialStock: 10, Stock: 5, Awaiting: 3, Paid: 2},
			panel{"unknown", "?", "Redis does not hold this campaign (it is not warmed, or it ended before Redis restarted), so only Postgres's numbers are known."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDash(t, generous)
			v := d.svc.add("sale", testNow.Add(-time.Hour), testNow.Add(time.Hour))
			d.svc.totals = map[int64]seckill.CampaignTotals{v.ID: tt.t}
			d.live.Set(v.ID, tt.live)
			if diff := cmp.Diff(tt.want, balancePanel(t, d, v.ID)); diff != "" {
				t.Errorf("balance panel (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("Redis cannot be read", func(t *testing.T) {
		d := newDash(t, generous, func(c *web.Config) { c.Live = failingLive{} })
		v := d.svc.add("sale", testNow.Add(-time.Hour), testNow.Add(time.Hour))
		got := balancePanel(t, d, v.ID)
		if got.State != "unknown" || !strings.Contains(got.Message, "only Postgres's numbers are known") {
			t.Errorf("balance panel %+v, want unknown with Postgres's numbers", got)
		}
	})
}

// balancePanel reads a campaign's consistency panel: its state, the sign
// between initial and the sum, and the message.
func balancePanel(t *testing.T, d *dash, id int64) (got panel) {
	t.Helper()
	frag := doc(t, d.do("GET", "/admin/campaigns/"+strconv.FormatInt(id, 10)+"/live", nil, d.login(t), nil))
	c := frag.Find(`[data-testid="consistency"]`)
	got.State = c.AttrOr("data-state", "")
	got.Op = strings.TrimSpace(c.Find(".balance .op").First().Text())
	got.Message = strings.TrimSpace(c.Find(`[data-testid="consistency-message"]`).Text())
	return got
}

// panel is what the consistency panel shows.
type panel struct{ State, Op, Message string }

type failingLive struct{}

func (failingLive) LiveCounts(context.Context, []int64) (map[int64]seckill.LiveCounts, error) {
	return nil, errors.New("redis down")
}
