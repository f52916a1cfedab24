DROP TRIGGER voucher_order_fill ON voucher_order;

--bun:split

CREATE TRIGGER voucher_order_fill BEFORE INSERT ON voucher_order
    FOR EACH ROW EXECUTE FUNCTION voucher_order_fill();
