ALTER TABLE seckill_campaign DROP CONSTRAINT seckill_campaign_shards_voucher_check, DROP COLUMN shards;
