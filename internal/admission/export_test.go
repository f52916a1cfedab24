package admission

import "seckill/internal/seckill"

// SoldOutMark returns the outcome an Admitter would answer locally for a
// campaign right now.
func SoldOutMark(a *Admitter, voucherID int64) (seckill.Outcome, bool) {
	st := a.local.get(voucherID)
	if st == nil {
		return "", false
	}
	return a.local.marked(st, st.gen.Load())
}

// CampaignKey returns the key of a campaign's hash.
func CampaignKey(a *Admitter, voucherID int64) string { return a.keys.campaign(voucherID) }

// BuyersKey returns the key of a campaign's buyers set.
func BuyersKey(a *Admitter, voucherID int64) string { return a.keys.buyers(voucherID) }

// PendingAtKey returns the key of a campaign's pending_at sorted set.
func PendingAtKey(a *Admitter, voucherID int64) string { return a.keys.pendingAt(voucherID) }

func PendingKey(a *Admitter, voucherID int64) string { return a.keys.pending(voucherID) }

func ReturnedKey(a *Admitter, voucherID int64) string { return a.keys.returned(voucherID) }

// ListenerDone is closed when the stock_returned listener has stopped.
func ListenerDone(a *Admitter) <-chan struct{} { return a.subDone }

// Unpipelined makes every admission of a go to Redis alone, at once, as
// before pipelining (benchmarks compare the two).
func Unpipelined(a *Admitter) {
	a.admits = newPipeline(a.rdb, admitScript, 1<<20, 1, 1)
}

// Prefix returns the key prefix of an Admitter.
func Prefix(a *Admitter) string { return a.keys.prefix }

// OrderStatusChannel returns the Bus's channel under prefix.
func OrderStatusChannel(prefix string) string { return keys{prefix: prefix}.orderStatus() }

// UserLimitKey is the key of a user's shared limit at a campaign.
func UserLimitKey(a *Admitter, voucherID, userID int64) string {
	return a.keys.userLimit(voucherID, userID)
}

// AddressLimitKey is the key of a client address's shared limit at a
// campaign; addr is a clientaddr.Bucket.
func AddressLimitKey(a *Admitter, voucherID int64, addr string) string {
	return a.keys.addressLimit(voucherID, addr)
}

// WrongKey is the key of a user's wrong answers to a campaign's challenge.
func WrongKey(a *Admitter, voucherID, userID int64) string { return a.keys.wrong(voucherID, userID) }
