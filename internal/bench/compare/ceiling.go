package compare

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill/internal/admission"
	"seckill/internal/seckill"
)

// CeilingVoucherID is the campaign the ceiling handler sells, under its own
// key prefix.
const CeilingVoucherID = 1

// Ceiling is the physical ceiling of the purchase path: a bare net/http
// handler that runs only the admission script (Admitter.Admit, with its
// local sold-out mark), without GraphQL, rate limiting, metrics or the
// persistence queue.
type Ceiling struct {
	rdb    *redis.Client
	adm    *admission.Admitter
	Prefix string // of its keys, deleted by Close
}

// OpenCeiling connects to Redis at redisURL and warms a campaign of stock
// units, on sale until end, under a key prefix of its own.
func OpenCeiling(ctx context.Context, redisURL string, poolSize int, stock int64, end time.Time) (*Ceiling, error) {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, fmt.Errorf("SECKILL_REDIS_URL: %w", err)
	}
	if poolSize > 0 {
		opt.PoolSize = poolSize
	}
	rdb := redis.NewClient(opt)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis at %s is not reachable: %w", opt.Addr, err)
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	c := &Ceiling{rdb: rdb, Prefix: "bench:ceiling:" + hex.EncodeToString(suffix[:]) + ":"}
	c.adm = admission.New(rdb, admission.Options{Prefix: c.Prefix})
	if err := c.adm.Load(ctx); err != nil {
		c.Close()
		return nil, err
	}
	_, err = c.adm.Warm(ctx, seckill.WarmState{Campaign: seckill.Campaign{
		VoucherID: CeilingVoucherID, InitialStock: stock, Stock: stock,
		BeginTime: time.Now().Add(-time.Minute), EndTime: end,
	}})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("ceiling: warm campaign: %w", err)
	}
	return c, nil
}

// Purchase admits userID through the script alone.
func (c *Ceiling) Purchase(ctx context.Context, voucherID, userID int64) (seckill.Outcome, int64, error) {
	o, adm, err := c.adm.Admit(ctx, voucherID, userID, seckill.Ticket{})
	return o, adm.OrderID, err
}

// State returns the live stock and the pending admissions.
func (c *Ceiling) State(ctx context.Context) (remaining, pending int64, err error) {
	rem, err := c.adm.Remaining(ctx, []int64{CeilingVoucherID})
	if err != nil {
		return 0, 0, err
	}
	q, err := c.adm.Queued(ctx, []int64{CeilingVoucherID})
	if err != nil {
		return 0, 0, err
	}
	return rem[CeilingVoucherID], q[CeilingVoucherID], nil
}

// Close deletes every key under the ceiling's prefix and disconnects.
func (c *Ceiling) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := c.rdb.Scan(ctx, 0, c.Prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if len(keys) > 0 {
		c.rdb.Unlink(ctx, keys...)
	}
	_ = c.rdb.Close()
}
