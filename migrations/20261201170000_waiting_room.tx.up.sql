-- A campaign's waiting room (issue #23): buyers join it from
-- room_opens_before_seconds before the sale, and are let through at
-- room_admit_per_second (0: no room), each with a pass of
-- room_pass_seconds. room_drawn is how many joined before the open, set
-- once at the open by the first process that reads it from Redis: every
-- process draws the same random order from it, and it outlives Redis.
ALTER TABLE seckill_campaign
    ADD COLUMN room_opens_before_seconds integer NOT NULL DEFAULT 0,
    ADD COLUMN room_admit_per_second integer NOT NULL DEFAULT 0,
    ADD COLUMN room_pass_seconds integer NOT NULL DEFAULT 0,
    ADD COLUMN room_drawn bigint,
    ADD CONSTRAINT seckill_campaign_room_check CHECK (
        (room_admit_per_second = 0 AND room_opens_before_seconds = 0 AND room_pass_seconds = 0)
        OR (room_admit_per_second BETWEEN 1 AND 1000000
            AND room_opens_before_seconds BETWEEN 1 AND 86400
            AND room_pass_seconds BETWEEN 10 AND 3600)),
    ADD CONSTRAINT seckill_campaign_room_drawn_check CHECK (room_drawn >= 0);
