DROP TABLE payment_event;

--bun:split

DROP TABLE payment;

--bun:split

DROP INDEX voucher_order_unreturned_idx;

--bun:split

DROP INDEX voucher_order_due_idx;

--bun:split

DROP INDEX voucher_order_voucher_id_user_id_key;

--bun:split

DELETE FROM voucher_order WHERE status IN ('CANCELLED', 'EXPIRED');

--bun:split

ALTER TABLE voucher_order
    DROP CONSTRAINT voucher_order_returned_check,
    DROP CONSTRAINT voucher_order_closed_check,
    DROP CONSTRAINT voucher_order_paid_check,
    DROP CONSTRAINT voucher_order_amount_check,
    DROP CONSTRAINT voucher_order_status_check,
    ADD CONSTRAINT voucher_order_voucher_id_user_id_key UNIQUE (voucher_id, user_id);

--bun:split

UPDATE voucher_order SET status = 'CREATED';

--bun:split

ALTER TABLE voucher_order
    ADD CONSTRAINT voucher_order_status_check CHECK (status IN ('CREATED'));

--bun:split

DROP TRIGGER voucher_order_fill ON voucher_order;

--bun:split

DROP FUNCTION voucher_order_fill();

--bun:split

ALTER TABLE voucher_order
    DROP COLUMN unit_returned, DROP COLUMN return_epoch, DROP COLUMN closed_at,
    DROP COLUMN paid_at, DROP COLUMN pay_by, DROP COLUMN amount;

--bun:split

ALTER TABLE seckill_campaign DROP COLUMN pay_window_seconds;
