DROP TABLE order_event;

--bun:split

ALTER TABLE voucher_order DROP COLUMN event_seq;

--bun:split

DROP TABLE event_endpoint;
