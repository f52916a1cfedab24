-- Vouchers, their flash-sale campaigns, and the orders persisted from Redis
-- admissions. Money is in cents. The database enforces the invariants the
-- service relies on: stock never below zero nor above what was put on sale,
-- one order per user and campaign, and orders only for existing vouchers.

CREATE TABLE voucher (
    id           bigserial   PRIMARY KEY,
    shop_id      bigint      NOT NULL CONSTRAINT voucher_shop_id_check CHECK (shop_id > 0),
    title        text        NOT NULL CONSTRAINT voucher_title_check CHECK (char_length(title) BETWEEN 1 AND 255),
    sub_title    text        NOT NULL DEFAULT '' CONSTRAINT voucher_sub_title_check CHECK (char_length(sub_title) <= 255),
    rules        text        NOT NULL DEFAULT '' CONSTRAINT voucher_rules_check CHECK (char_length(rules) <= 4096),
    pay_value    bigint      NOT NULL CONSTRAINT voucher_pay_value_check CHECK (pay_value >= 0),
    actual_value bigint      NOT NULL,
    type         text        NOT NULL CONSTRAINT voucher_type_check CHECK (type IN ('NORMAL', 'SECKILL')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT voucher_actual_value_check CHECK (actual_value >= pay_value)
);

--bun:split

-- One campaign per seckill voucher. stock counts the units not yet persisted
-- as orders; PersistOrders decrements it with a guard (stock >= n), and the
-- CHECKs make an oversell impossible even for a faulty writer.
CREATE TABLE seckill_campaign (
    voucher_id    bigint      PRIMARY KEY REFERENCES voucher (id) ON DELETE CASCADE,
    initial_stock bigint      NOT NULL CONSTRAINT seckill_campaign_initial_stock_check CHECK (initial_stock >= 1),
    stock         bigint      NOT NULL CONSTRAINT seckill_campaign_stock_check CHECK (stock >= 0),
    begin_time    timestamptz NOT NULL,
    end_time      timestamptz NOT NULL,
    paused        boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT seckill_campaign_stock_initial_check CHECK (stock <= initial_stock),
    CONSTRAINT seckill_campaign_window_check CHECK (end_time > begin_time)
);

--bun:split

-- WarmStates reads the campaigns that have not ended.
CREATE INDEX seckill_campaign_end_time_idx ON seckill_campaign (end_time);

--bun:split

-- Persisted orders. The id is assigned by the admission script (high 32 bits
-- voucher id, low 32 bits a per-campaign sequence), so it is not serial: a
-- re-delivered admission hits the primary key and is not written twice.
CREATE TABLE voucher_order (
    id          bigint      PRIMARY KEY CONSTRAINT voucher_order_id_check CHECK (id > 0),
    user_id     bigint      NOT NULL CONSTRAINT voucher_order_user_id_check CHECK (user_id > 0),
    voucher_id  bigint      NOT NULL REFERENCES voucher (id),
    status      text        NOT NULL DEFAULT 'CREATED' CONSTRAINT voucher_order_status_check CHECK (status IN ('CREATED')),
    admitted_at timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT voucher_order_voucher_id_user_id_key UNIQUE (voucher_id, user_id)
);

--bun:split

CREATE INDEX voucher_order_user_id_id_idx ON voucher_order (user_id, id DESC);

--bun:split

-- Admissions that could never be persisted. They live apart from
-- voucher_order so that its UNIQUE (voucher_id, user_id) stays exactly "one
-- order per user and campaign" and a user whose order failed may buy again.
CREATE TABLE order_failure (
    id          bigint      PRIMARY KEY CONSTRAINT order_failure_id_check CHECK (id > 0),
    user_id     bigint      NOT NULL CONSTRAINT order_failure_user_id_check CHECK (user_id > 0),
    voucher_id  bigint      NOT NULL REFERENCES voucher (id),
    reason      text        NOT NULL CONSTRAINT order_failure_reason_check CHECK (reason <> ''),
    admitted_at timestamptz NOT NULL,
    failed_at   timestamptz NOT NULL DEFAULT now()
);

--bun:split

CREATE INDEX order_failure_voucher_id_idx ON order_failure (voucher_id);

--bun:split

CREATE INDEX order_failure_user_id_id_idx ON order_failure (user_id, id DESC);
