-- Order events to the platform (issue #22): signed webhooks to endpoints,
-- written to an outbox in the transaction of the change they report.

-- Where events go: the endpoint of SECKILL_EVENTS_WEBHOOK_URL (source 'env',
-- kept in step with the environment at start) and those added on the
-- dashboard ('dashboard'), each with its own secret (HMAC needs it in
-- clear). failures/next_attempt_at are the endpoint's own backoff: after a
-- round in which nothing it was sent succeeded it is probed with one event
-- at a time until it answers again.
CREATE TABLE event_endpoint (
    id              bigserial   PRIMARY KEY,
    url             text        NOT NULL CONSTRAINT event_endpoint_url_check CHECK (url ~ '^https?://' AND char_length(url) <= 2048),
    secret          text        NOT NULL CONSTRAINT event_endpoint_secret_check CHECK (char_length(secret) >= 16),
    source          text        NOT NULL CONSTRAINT event_endpoint_source_check CHECK (source IN ('env', 'dashboard')),
    enabled         boolean     NOT NULL DEFAULT true,
    failures        integer     NOT NULL DEFAULT 0 CONSTRAINT event_endpoint_failures_check CHECK (failures >= 0),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text        NOT NULL DEFAULT '',
    last_success_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);

--bun:split

-- At most one endpoint comes from the environment.
CREATE UNIQUE INDEX event_endpoint_env_key ON event_endpoint (source) WHERE source = 'env';

--bun:split

-- The per-order sequence of events: 1 for order.created, and every later
-- transition an event reports (paid, cancelled, expired, refund succeeded or
-- failed) adds one in the statement that makes it, under the order's row
-- lock. No global counter: each order counts its own.
ALTER TABLE voucher_order ADD COLUMN event_seq integer NOT NULL DEFAULT 1;

--bun:split

-- The outbox: one row per event and endpoint, written in the transaction of
-- the change it reports (none while no endpoint is enabled). The event's id
-- is evt_<order_id>_<sequence>, the same for every endpoint. data is the
-- order (and the payment, for refund events) as the change left it, as json
-- (text: it is only ever sent, never queried, and json_build_object is
-- cheaper than jsonb's).
-- Delivered rows are deleted at once, or, with SECKILL_EVENTS_RETENTION,
-- keep delivered_at until it prunes them (to redeliver a range of them); a row that used up its attempts
-- is dead and holds back the later events of its order at its endpoint
-- until an operator redelivers it.
CREATE TABLE order_event (
    endpoint_id     bigint      NOT NULL REFERENCES event_endpoint (id) ON DELETE CASCADE,
    order_id        bigint      NOT NULL,
    sequence        integer     NOT NULL CONSTRAINT order_event_sequence_check CHECK (sequence >= 1),
    type            text        NOT NULL CONSTRAINT order_event_type_check CHECK (type IN ('order.created', 'order.paid',
                                    'order.cancelled', 'order.expired', 'order.failed', 'refund.succeeded', 'refund.failed')),
    data            json        NOT NULL,
    occurred_at     timestamptz NOT NULL DEFAULT now(),
    attempts        integer     NOT NULL DEFAULT 0 CONSTRAINT order_event_attempts_check CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz,
    last_status     integer     NOT NULL DEFAULT 0,
    last_answer     text        NOT NULL DEFAULT '' CONSTRAINT order_event_last_answer_check CHECK (length(last_answer) <= 500),
    delivered_at    timestamptz,
    dead            boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (endpoint_id, order_id, sequence),
    CONSTRAINT order_event_dead_check CHECK (NOT (dead AND delivered_at IS NOT NULL))
);

--bun:split

-- What the delivery worker claims: an endpoint's undelivered, live events, due first.
CREATE INDEX order_event_due_idx ON order_event (endpoint_id, next_attempt_at) WHERE delivered_at IS NULL AND NOT dead;

--bun:split

-- The pruning of delivered events kept for SECKILL_EVENTS_RETENTION. (The
-- dashboard's lists and ranges scan: an index more on the outbox would cost
-- every purchase, for an operator's rare look.)
CREATE INDEX order_event_delivered_idx ON order_event (delivered_at) WHERE delivered_at IS NOT NULL;
