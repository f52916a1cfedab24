package salepage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"seckill/internal/seckill"
)

// Stock is the answer of GET /sale/{voucherId}/stock.
type Stock struct {
	Stock     int64                  `json:"stock"`     // every unit ever put on sale
	Remaining int64                  `json:"remaining"` // units left now
	Status    seckill.CampaignStatus `json:"status"`    // when it was read
	// Rev is the campaign answer's: when it differs from the one a page
	// loaded, the operator changed the sale (its window, texts, challenge
	// or room) since, and the page reads the campaign again.
	Rev string `json:"rev"`
}

// Campaign is the answer of GET /sale/{voucherId}/campaign: everything
// about the sale that is the same for every buyer, with the names and
// values of the GraphQL API's Voucher and SeckillCampaign. Times are UTC
// with every fraction of a second the store holds, as the API writes them:
// the countdown and the waiting room's turns run from BeginTime.
type Campaign struct {
	Title       string                 `json:"title"`
	SubTitle    string                 `json:"subTitle"`
	PayValue    int64                  `json:"payValue"`    // what the buyer pays, in Currency's minor unit
	ActualValue int64                  `json:"actualValue"` // what the voucher is worth, likewise
	Currency    string                 `json:"currency"`    // ISO 4217, the payments' (SECKILL_PAYMENT_CURRENCY)
	MinorDigits int                    `json:"minorDigits"` // decimal digits of its minor unit: 2 for CNY, 0 for JPY
	Stock       int64                  `json:"stock"`
	Remaining   int64                  `json:"remaining"`
	Status      seckill.CampaignStatus `json:"status"` // when it was read
	BeginTime   time.Time              `json:"beginTime"`
	EndTime     time.Time              `json:"endTime"`
	Challenge   seckill.ChallengeKind  `json:"challenge"`
	PowBits     *int                   `json:"powBits"`     // PROOF_OF_WORK only
	WaitingRoom *WaitingRoom           `json:"waitingRoom"` // nil: none
	// Rev names what the rest says, but what changes by itself (stock,
	// remaining, status): the Stock answers carry it too.
	Rev string `json:"rev"`
}

// WaitingRoom is a campaign's waiting room in a Campaign answer.
type WaitingRoom struct {
	OpensAt        time.Time `json:"opensAt"`
	AdmitPerSecond int       `json:"admitPerSecond"`
	PassSeconds    int       `json:"passSeconds"`
}

func toStock(c *seckill.Campaign, now time.Time) Stock {
	return Stock{Stock: c.InitialStock, Remaining: max(0, c.LiveRemaining()), Status: c.StatusAt(now)}
}

// toCampaign converts a voucher that has a campaign.
func toCampaign(v *seckill.Voucher, currency string, now time.Time) Campaign {
	c := v.Campaign
	s := toStock(c, now)
	out := Campaign{Title: v.Title, SubTitle: v.SubTitle, PayValue: v.PayValue, ActualValue: v.ActualValue,
		Currency: currency, MinorDigits: seckill.MinorDigits(currency),
		Stock: s.Stock, Remaining: s.Remaining, Status: s.Status,
		BeginTime: c.BeginTime.UTC(), EndTime: c.EndTime.UTC(), Challenge: c.Challenge}
	if out.Challenge == "" {
		out.Challenge = seckill.ChallengeNone
	}
	if c.Challenge == seckill.ChallengePoW {
		b := c.PoWBits
		out.PowBits = &b
	}
	if c.Room.Enabled() {
		out.WaitingRoom = &WaitingRoom{OpensAt: c.RoomOpensAt().UTC(), AdmitPerSecond: c.Room.AdmitPerSecond,
			PassSeconds: int(c.Room.PassFor / time.Second)}
	}
	out.Rev = revOf(out)
	return out
}

// revOf is a short digest of what a Campaign answer says that only an
// operator changes.
func revOf(c Campaign) string {
	c.Stock, c.Remaining, c.Status, c.Rev = 0, 0, "", ""
	b, _ := json.Marshal(c) // a plain struct: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
