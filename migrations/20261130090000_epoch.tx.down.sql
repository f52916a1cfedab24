ALTER TABLE seckill_campaign DROP COLUMN epoch;
