-- After the purchase: an order waits for payment until pay_by, then is PAID,
-- or CANCELLED by its buyer (or an operator), or EXPIRED; a cancelled or
-- expired order gives its unit back. Payments are confirmed by the payment
-- provider's webhook; each provider event is applied once.

-- The pay window of a campaign, in seconds (SECKILL_PAY_WINDOW at creation
-- unless the campaign sets its own).
ALTER TABLE seckill_campaign
    ADD COLUMN pay_window_seconds integer NOT NULL DEFAULT 900
    CONSTRAINT seckill_campaign_pay_window_check CHECK (pay_window_seconds BETWEEN 1 AND 86400);

--bun:split

-- amount is the voucher's pay_value when the order was admitted; pay_by its
-- admission time plus the campaign's pay window. closed_at is when it was
-- cancelled or expired, return_epoch the campaign epoch in which that gave
-- the unit back to Postgres's stock (a rebuild in a later epoch counts it),
-- unit_returned whether Redis has taken it back too.
ALTER TABLE voucher_order
    ADD COLUMN amount bigint,
    ADD COLUMN pay_by timestamptz,
    ADD COLUMN paid_at timestamptz,
    ADD COLUMN closed_at timestamptz,
    ADD COLUMN return_epoch integer,
    ADD COLUMN unit_returned boolean NOT NULL DEFAULT false;

--bun:split

UPDATE voucher_order AS o SET amount = v.pay_value, pay_by = now() + interval '15 minutes'
FROM voucher AS v WHERE v.id = o.voucher_id;

--bun:split

-- A new order takes its amount and pay_by from its voucher and campaign, in
-- the INSERT itself: the persistence batch need not read them first.
CREATE FUNCTION voucher_order_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT v.pay_value, NEW.admitted_at + make_interval(secs => coalesce(c.pay_window_seconds, 900))
    INTO NEW.amount, NEW.pay_by
    FROM voucher AS v LEFT JOIN seckill_campaign AS c ON c.voucher_id = v.id
    WHERE v.id = NEW.voucher_id;
    IF NOT FOUND THEN
        -- No such voucher: leave it to the foreign key to say so.
        NEW.amount := 0;
        NEW.pay_by := NEW.admitted_at;
    END IF;
    RETURN NEW;
END $$;

--bun:split

CREATE TRIGGER voucher_order_fill BEFORE INSERT ON voucher_order
    FOR EACH ROW EXECUTE FUNCTION voucher_order_fill();

--bun:split

ALTER TABLE voucher_order
    DROP CONSTRAINT voucher_order_status_check,
    ALTER COLUMN amount SET NOT NULL,
    ALTER COLUMN pay_by SET NOT NULL,
    ADD CONSTRAINT voucher_order_status_check CHECK (status IN ('CREATED', 'PAID', 'CANCELLED', 'EXPIRED')),
    ADD CONSTRAINT voucher_order_amount_check CHECK (amount >= 0),
    ADD CONSTRAINT voucher_order_paid_check CHECK ((status = 'PAID') = (paid_at IS NOT NULL)),
    ADD CONSTRAINT voucher_order_closed_check CHECK (
        (status IN ('CANCELLED', 'EXPIRED')) = (closed_at IS NOT NULL AND return_epoch IS NOT NULL)),
    ADD CONSTRAINT voucher_order_returned_check CHECK (NOT unit_returned OR closed_at IS NOT NULL);

--bun:split

-- One order per user and campaign among those that hold a unit: a buyer
-- whose order was cancelled or expired may buy again.
ALTER TABLE voucher_order DROP CONSTRAINT voucher_order_voucher_id_user_id_key;

--bun:split

CREATE UNIQUE INDEX voucher_order_voucher_id_user_id_key ON voucher_order (voucher_id, user_id)
    WHERE status IN ('CREATED', 'PAID');

--bun:split

-- The expiry sweep looks for CREATED orders past pay_by.
CREATE INDEX voucher_order_due_idx ON voucher_order (pay_by) WHERE status = 'CREATED';

--bun:split

-- The return sweep looks for closed orders whose unit Redis has not taken back.
CREATE INDEX voucher_order_unreturned_idx ON voucher_order (closed_at)
    WHERE status IN ('CANCELLED', 'EXPIRED') AND NOT unit_returned;

--bun:split

-- A payment of one order, as handed to the provider. At most one payment of
-- an order is open (PENDING) or succeeded; a failed one may be followed by
-- another. REFUND_NEEDED: the provider took the money after the order had
-- expired or been cancelled, so it must be given back.
CREATE TABLE payment (
    id         text        PRIMARY KEY CONSTRAINT payment_id_check CHECK (id ~ '^pay_[0-9a-f]{32}$'),
    order_id   bigint      NOT NULL REFERENCES voucher_order (id),
    amount     bigint      NOT NULL CONSTRAINT payment_amount_check CHECK (amount >= 0),
    currency   text        NOT NULL CONSTRAINT payment_currency_check CHECK (currency ~ '^[A-Z]{3}$'),
    status     text        NOT NULL DEFAULT 'PENDING'
                           CONSTRAINT payment_status_check CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED', 'REFUND_NEEDED')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

--bun:split

CREATE UNIQUE INDEX payment_order_id_open_key ON payment (order_id) WHERE status <> 'FAILED';

--bun:split

CREATE INDEX payment_refund_idx ON payment (order_id) WHERE status = 'REFUND_NEEDED';

--bun:split

-- Provider events applied, by the provider's event id: a redelivered event
-- finds its row and changes nothing.
CREATE TABLE payment_event (
    id          text        PRIMARY KEY CONSTRAINT payment_event_id_check CHECK (char_length(id) BETWEEN 1 AND 128),
    payment_id  text        NOT NULL REFERENCES payment (id),
    type        text        NOT NULL,
    outcome     text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
