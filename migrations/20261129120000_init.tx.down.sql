DROP TABLE IF EXISTS order_failure;

--bun:split

DROP TABLE IF EXISTS voucher_order;

--bun:split

DROP TABLE IF EXISTS seckill_campaign;

--bun:split

DROP TABLE IF EXISTS voucher;
