-- Order id epochs. An order id is voucher << 32 | epoch << 22 | seq: each time
-- a campaign's Redis state is rebuilt from Postgres (Redis lost data, failed
-- over, or used up an epoch's 2^22 sequence numbers) the rebuild takes the
-- next epoch here, under the campaign's row lock, and Redis starts its
-- sequence again at 1 inside it. Ids handed out before a loss can therefore
-- never be handed out again, whatever Redis forgot. The same lock fences the
-- rebuild against batches from before the loss: PersistOrders takes stock
-- only from a campaign whose epoch is still the admission's.
ALTER TABLE seckill_campaign
    ADD COLUMN epoch integer NOT NULL DEFAULT 0
    CONSTRAINT seckill_campaign_epoch_check CHECK (epoch BETWEEN 0 AND 1023);

--bun:split

-- Campaigns that already have orders start past every epoch their ids use.
UPDATE seckill_campaign AS c SET epoch = LEAST(1023, GREATEST(
    (SELECT max((o.id & 4294967295) >> 22) FROM voucher_order AS o WHERE o.voucher_id = c.voucher_id),
    (SELECT max((f.id & 4294967295) >> 22) FROM order_failure AS f WHERE f.voucher_id = c.voucher_id),
    0));
