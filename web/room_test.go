package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"seckill/internal/seckill"
)

// A campaign with a waiting room shows its settings and its layers; one
// without shows neither; a room that cannot be read says so and the page
// still renders.
func TestWaitingRoomPanel(t *testing.T) {
	d := newDash(t, generous)
	room := d.svc.add("with a room", testNow.Add(-time.Minute), testNow.Add(time.Hour))
	room.Campaign.Room = seckill.WaitingRoom{OpensBefore: 10 * time.Minute, AdmitPerSecond: 250, PassFor: 90 * time.Second}
	plain := d.svc.add("without", testNow.Add(-time.Minute), testNow.Add(time.Hour))
	d.rooms.set(room.ID, seckill.RoomFunnel{Joined: 1200, Waiting: 700, LetThrough: 500, PassesLive: 320, Expired: 180, Admitted: 140}, nil)
	c := d.login(t)

	page := doc(t, d.do("GET", "/admin/campaigns/1", nil, c, nil))
	text := func(id string) string {
		return strings.Join(strings.Fields(page.Find(`[data-testid="`+id+`"]`).Text()), " ")
	}
	got := map[string]string{}
	for _, id := range []string{"room-opens", "room-rate", "room-pass", "room-joined", "room-waiting", "room-let-through",
		"room-passes-live", "room-expired", "room-admitted", "room-unused"} {
		got[id] = text(id)
	}
	want := map[string]string{"room-opens": "10 minutes", "room-rate": "250", "room-pass": "1 minute 30 seconds",
		"room-joined": "1,200", "room-waiting": "700", "room-let-through": "500", "room-passes-live": "320",
		"room-expired": "180", "room-admitted": "140", "room-unused": "360"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("room (-want +got):\n%s", diff)
	}
	if !strings.Contains(text("campaign-room"), "turns a second, a pass lasts 1 minute 30 seconds; opens 10 minutes before the sale, at 2026-12-01 09:49:00 UTC") {
		t.Errorf("room settings %q lack when it opens", text("campaign-room"))
	}
	// The live fragment carries the layers too.
	frag := doc(t, d.do("GET", "/admin/campaigns/1/live", nil, c, nil))
	if n := frag.Find(`[data-testid="room-joined"]`).Text(); n != "1,200" {
		t.Errorf("fragment: joined %q", n)
	}

	other := doc(t, d.do("GET", "/admin/campaigns/2", nil, c, nil))
	if other.Find(`[data-testid="room"]`).Length() != 0 || !strings.Contains(other.Find(`[data-testid="campaign-room"]`).Text(), "none") {
		t.Errorf("campaign %d without a room shows one: %q", plain.ID, other.Find(`[data-testid="campaign-room"]`).Text())
	}

	d.rooms.set(room.ID, seckill.RoomFunnel{}, seckill.Errorf(seckill.EUNAVAILABLE, "the waiting room could not be read in time; try again"))
	res := d.do("GET", "/admin/campaigns/1", nil, c, nil)
	down := doc(t, res)
	if res.StatusCode != 200 || !strings.Contains(down.Find(`[data-testid="room-error"]`).Text(), "could not be read in time") {
		t.Errorf("room unreadable: %s, %q", res.Status, down.Find(`[data-testid="room-error"]`).Text())
	}
}
