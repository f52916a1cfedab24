package seckill

// A campaign's stock shards (issue #21). A campaign of one shard is the
// campaign as it always was: one Redis hash tag, one slot of one master. A
// campaign of N > 1 shards holds its stock in N hash tags, which admission
// places on different slots so that a cluster spreads them over its
// masters; every buyer belongs to one shard, so one-per-user stays one
// shard's decision, in the one script call of a purchase. Units move
// between shards where buyers are (admission), so the campaign sells out to
// exactly its stock; a buyer hears SOLD_OUT only when no shard has a unit
// left, and TRY_AGAIN while units are on their way to theirs.

// MaxShards bounds a campaign's stock shards: the shard of an order id has
// 6 bits (order.go).
const MaxShards = 64

// ShardOf returns the shard of a campaign of shards shards that a user's
// purchases are decided in: a stable hash of the user id (splitmix64's
// finaliser, so consecutive ids spread evenly), stored nowhere. Every
// process computes the same.
func ShardOf(userID int64, shards int) int {
	if shards <= 1 {
		return 0
	}
	z := uint64(userID) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return int(z % uint64(shards))
}

// SplitStock returns how many of stock units each of shards shards starts
// with: an even share, the first shards one more until the remainder is
// spent.
func SplitStock(stock int64, shards int) []int64 {
	shards = max(shards, 1)
	out := make([]int64, shards)
	for i := range out {
		out[i] = stock / int64(shards)
		if int64(i) < stock%int64(shards) {
			out[i]++
		}
	}
	return out
}

// ShardCount is a campaign's number of shards, 1 for a campaign stored
// before shards (0).
func (c *Campaign) ShardCount() int { return max(c.Shards, 1) }
