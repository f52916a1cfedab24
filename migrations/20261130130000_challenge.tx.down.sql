DROP TABLE campaign_quiz;

--bun:split

ALTER TABLE seckill_campaign DROP COLUMN challenge, DROP COLUMN pow_bits, DROP COLUMN brake;
