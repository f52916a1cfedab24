ALTER TABLE seckill_campaign DROP COLUMN shard_epochs;
