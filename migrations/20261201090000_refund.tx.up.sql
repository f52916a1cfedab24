-- Money after the purchase (issue #18): a payment owed back is refunded
-- through the provider, and a closed order keeps no payable payment.
--
-- New payment statuses:
--   CANCELLED      the order closed (or another payment paid it) before the
--                  provider answered: it can no longer be paid; a success
--                  that still arrives is owed back
--   REFUNDING      the refund was sent to the provider, awaiting its
--                  confirmation
--   REFUNDED       the provider confirmed the refund
--   REFUND_FAILED  the provider refused the refund, or never confirmed it
--                  after every attempt: an operator must look (it alerts)
ALTER TABLE payment
    DROP CONSTRAINT payment_status_check,
    ADD CONSTRAINT payment_status_check CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED', 'CANCELLED',
        'REFUND_NEEDED', 'REFUNDING', 'REFUNDED', 'REFUND_FAILED'));

--bun:split

-- At most one payment of an order is payable (PENDING) or paid it
-- (SUCCEEDED). Any number may be owed back: a success the provider confirms
-- after the order was paid by another payment, cancelled or expired.
DROP INDEX payment_order_id_open_key;

--bun:split

CREATE UNIQUE INDEX payment_order_id_open_key ON payment (order_id) WHERE status IN ('PENDING', 'SUCCEEDED');

--bun:split

-- The refund of a payment owed back. owed_at: when it became owed (a
-- refund still unconfirmed an hour later alerts); refund_generation: the
-- refund's idempotency key is derived from the payment and this number,
-- which moves on only when an operator retries a refund the provider
-- refused (refund_refused: it would answer the old key with the same
-- refusal); refund_round: the operator's retries; refund_sends: sends in
-- this round; refund_sent_at: the last send; refunded_at: the provider's
-- confirmation; refund_error: the provider's last refusal or failure, for
-- the operator.
ALTER TABLE payment
    ADD COLUMN owed_at timestamptz,
    ADD COLUMN refund_generation integer NOT NULL DEFAULT 0
        CONSTRAINT payment_refund_generation_check CHECK (refund_generation >= 0),
    ADD COLUMN refund_round integer NOT NULL DEFAULT 0
        CONSTRAINT payment_refund_round_check CHECK (refund_round >= 0),
    ADD COLUMN refund_sends integer NOT NULL DEFAULT 0
        CONSTRAINT payment_refund_sends_check CHECK (refund_sends >= 0),
    ADD COLUMN refund_refused boolean NOT NULL DEFAULT false,
    ADD COLUMN refund_sent_at timestamptz,
    ADD COLUMN refunded_at timestamptz,
    ADD COLUMN refund_error text NOT NULL DEFAULT ''
        CONSTRAINT payment_refund_error_check CHECK (length(refund_error) <= 500);

--bun:split

UPDATE payment SET owed_at = updated_at, refund_generation = 1 WHERE status = 'REFUND_NEEDED';

--bun:split

ALTER TABLE payment
    ADD CONSTRAINT payment_owed_check CHECK (
        (status IN ('REFUND_NEEDED', 'REFUNDING', 'REFUNDED', 'REFUND_FAILED'))
            = (owed_at IS NOT NULL AND refund_generation > 0)),
    ADD CONSTRAINT payment_refunded_check CHECK ((status = 'REFUNDED') = (refunded_at IS NOT NULL));

--bun:split

-- Refunds, oldest owed first: the sweep that sends them, the dashboard, the
-- metrics. Few payments are ever owed back, so the index stays small.
DROP INDEX payment_refund_idx;

--bun:split

CREATE INDEX payment_refund_idx ON payment (owed_at) WHERE owed_at IS NOT NULL;

--bun:split

-- An order's payments, for the order's page (Order.payments).
CREATE INDEX payment_order_idx ON payment (order_id);
