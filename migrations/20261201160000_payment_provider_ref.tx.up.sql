-- The payment provider's own reference to a payment (Stripe's PaymentIntent
-- id), answered when the payment is opened and named by its refund, so that
-- a refund does not have to search the provider for it. NULL for the
-- built-in provider and for payments opened before.
ALTER TABLE payment ADD COLUMN provider_ref text CHECK (length(provider_ref) BETWEEN 1 AND 255);
