ALTER TABLE seckill_campaign
    DROP CONSTRAINT seckill_campaign_room_drawn_check,
    DROP CONSTRAINT seckill_campaign_room_check,
    DROP COLUMN room_drawn,
    DROP COLUMN room_pass_seconds,
    DROP COLUMN room_admit_per_second,
    DROP COLUMN room_opens_before_seconds;
