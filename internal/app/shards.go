package app

import (
	"context"
	"fmt"
	"io"

	"seckill/internal/admission"
	"seckill/internal/config"
)

// CheckShards prints where the stock shards of each campaign of ids live
// (admission.Placement: each shard's tag, slot and master, as Redis knows
// the campaign) and fails when a campaign's shards share masters they need
// not share on the configured cluster (admission.Placement.Uneven), so that
// a script can run it after a reshard.
func CheckShards(ctx context.Context, cfg *config.Config, ids []int64, out io.Writer) error {
	rdb, _, err := openRedis(cfg, nil) // read only: no guard, it stops nothing
	if err != nil {
		return err
	}
	defer rdb.Close()
	ps, err := admission.New(rdb, admission.Options{}).Placement(ctx, ids)
	if err != nil {
		return fmt.Errorf("%s: %w", redisWhere(cfg), err)
	}
	var uneven []int64
	for _, p := range ps {
		switch {
		case p.Masters == 0:
			fmt.Fprintf(out, "campaign %d: %d shard(s), Redis is not a cluster: all on one server\n", p.VoucherID, len(p.Shards))
		case p.Uneven():
			uneven = append(uneven, p.VoucherID)
			fmt.Fprintf(out, "campaign %d: %d shard(s) on %d of %d masters: UNEVEN, move a shared master's shard slot to an idle master\n",
				p.VoucherID, len(p.Shards), p.Used(), p.Masters)
		default:
			fmt.Fprintf(out, "campaign %d: %d shard(s) on %d of %d masters: ok\n", p.VoucherID, len(p.Shards), p.Used(), p.Masters)
		}
		for _, s := range p.Shards {
			fmt.Fprintf(out, "  shard %-2d  {%s}  slot %-5d  %s\n", s.Shard, s.Tag, s.Slot, s.Master)
		}
	}
	if len(uneven) > 0 {
		return fmt.Errorf("the stock shards of campaigns %v share masters they need not share", uneven)
	}
	return nil
}
