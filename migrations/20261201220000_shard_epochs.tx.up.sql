-- Each stock shard of a campaign has its own order id epoch (issue #21): a
-- rebuild of the shards a failover lost moves only them to a new epoch, so
-- the other shards keep selling and their orders keep taking stock in
-- theirs. NULL: every shard is in the campaign's epoch (a campaign of one
-- shard, and any campaign after a rebuild of all its shards); otherwise one
-- epoch a shard, shard 0 first, and the campaign's epoch is the highest.
ALTER TABLE seckill_campaign
    ADD COLUMN shard_epochs bigint[]
        CONSTRAINT seckill_campaign_shard_epochs_check
            CHECK (shard_epochs IS NULL OR (cardinality(shard_epochs) = shards AND array_position(shard_epochs, NULL) IS NULL));
