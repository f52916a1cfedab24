-- A provider's event that names an object of the provider other than the
-- one opened for its payment (Stripe: another PaymentIntent than
-- payment.provider_ref), or another amount or currency, is not applied: it
-- is recorded here under its event id (outcome 'mismatch', so that its
-- redeliveries are duplicates), with the object it named (provider_ref) and
-- why (mismatch), for an operator to look at. Both are NULL for the events
-- that applied.
ALTER TABLE payment_event ADD COLUMN provider_ref text CHECK (length(provider_ref) BETWEEN 1 AND 255);

--bun:split

ALTER TABLE payment_event ADD COLUMN mismatch text CHECK (char_length(mismatch) BETWEEN 1 AND 500);

--bun:split

CREATE INDEX payment_event_mismatch_idx ON payment_event (received_at) WHERE mismatch IS NOT NULL;
