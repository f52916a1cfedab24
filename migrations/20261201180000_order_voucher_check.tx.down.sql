DROP TRIGGER voucher_keep_ordered_id ON voucher;

--bun:split

DROP TRIGGER voucher_keep_ordered ON voucher;

--bun:split

DROP FUNCTION voucher_keep_ordered();

--bun:split

DROP TRIGGER voucher_order_voucher_fixed ON voucher_order;

--bun:split

DROP FUNCTION voucher_order_voucher_fixed();

--bun:split

DROP TRIGGER voucher_order_voucher_check ON voucher_order;

--bun:split

DROP FUNCTION voucher_order_voucher_check();

--bun:split

ALTER TABLE voucher_order ADD CONSTRAINT voucher_order_voucher_id_fkey
    FOREIGN KEY (voucher_id) REFERENCES voucher (id);
