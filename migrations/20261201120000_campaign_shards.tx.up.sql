-- A campaign's Redis stock shards (issue #21): 1 (every campaign before) to
-- 64. An order id of a shard other than 0 holds the voucher id in 24 bits
-- (seckill.ShardOrderID), so a campaign of several shards needs a voucher
-- id below 2^24.
ALTER TABLE seckill_campaign
    ADD COLUMN shards integer NOT NULL DEFAULT 1
        CONSTRAINT seckill_campaign_shards_check CHECK (shards BETWEEN 1 AND 64),
    ADD CONSTRAINT seckill_campaign_shards_voucher_check CHECK (shards = 1 OR voucher_id < 16777216);
