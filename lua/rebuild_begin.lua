-- rebuild_begin takes a campaign's rebuild lock and stops its admissions, so
-- that one process at a time rebuilds it from Postgres (rebuild.lua ends it),
-- and only while it needs a rebuild: a campaign installed and admitting is
-- left alone, so that a process that saw it stopped a moment ago does not
-- rebuild it again after another process did (each rebuild spends an epoch
-- and stops the sale).
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign   hash: stock, epoch, seq, ..., state
-- KEYS[2] -> <p>seckill:{v<voucher>}:rebuild    string: the holder's token
-- --
-- ARGV[1] -> token: the holder's random token (1 to 64 characters)
-- ARGV[2] -> ttl_ms: how long the lock lives unless ended (1000 to 600000)
-- ARGV[3] -> max_seq: the last sequence of an epoch (a campaign whose seq
--            reached it must move to the next epoch), a positive integer
-- ARGV[4] -> mode, optional: "shards" for a rebuild of some stock shards of
--            a campaign of several (those a failover lost), which takes the
--            lock whatever shard 0's state and leaves it admitting; the
--            caller stops the shards it rebuilds (shard_stop.lua). It also
--            marks shard 0's hash "recount": the units those shards' Redis
--            lost are counted back from Postgres by a rebuild of the whole
--            campaign once nothing is left elsewhere (admission's shards.go).
--
-- A campaign needs a rebuild when Redis lacks it (no stock or no epoch),
-- when it is stopped (any state: stale, rebuilding) or when its epoch's
-- sequence is used up; Admitter.NeedsRebuild asks the same.
--
-- Returns:
--   3 mode "shards" only: the lock is ours, and this call marked shard 0's
--     hash "recount" (it was not): a caller whose second look finds no
--     shard to rebuild after all takes the mark back with the lock
--     (rebuild_abort.lua), or a campaign it never stopped would be rebuilt
--     whole at its sell-out
--   1 the lock is ours; the campaign has state "rebuilding" (a campaign
--     Redis lacked is a hash of that field alone) and admits nobody, and
--     Warm installs nothing, until rebuild.lua installs it
--   0 another process holds the lock; nothing changed
--   2 the campaign needs no rebuild; nothing changed (never in mode
--     "shards")
-- Errors, before any write: any malformed argument.
local token, ttl, max_seq = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if type(token) ~= 'string' or #token < 1 or #token > 64 then
  return redis.error_reply('ERR rebuild_begin: ARGV[1] token must have 1 to 64 characters')
end
if not ttl or ttl < 1000 or ttl > 600000 or ttl % 1 ~= 0 then
  return redis.error_reply('ERR rebuild_begin: ARGV[2] ttl_ms must be an integer in [1000, 600000]')
end
if not max_seq or max_seq < 1 or max_seq % 1 ~= 0 then
  return redis.error_reply('ERR rebuild_begin: ARGV[3] max_seq must be a positive integer')
end
local mode = ARGV[4]
if mode ~= nil and mode ~= 'shards' then
  return redis.error_reply('ERR rebuild_begin: ARGV[4] mode must be "shards" or absent')
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
if mode == 'shards' then
  redis.call('SET', KEYS[2], token, 'PX', string.format('%d', ttl))
  if redis.call('HEXISTS', KEYS[1], 'stock') == 1 and redis.call('HSETNX', KEYS[1], 'recount', '1') == 1 then
    return 3
  end
  return 1
end
local c = redis.call('HMGET', KEYS[1], 'stock', 'epoch', 'state', 'seq')
if c[1] and c[2] and not c[3] and (tonumber(c[4]) or 0) < max_seq then
  return 2
end
redis.call('SET', KEYS[2], token, 'PX', string.format('%d', ttl))
-- Even a campaign Redis lacks gets the state (a hash of that field alone):
-- Warm installs only where no hash is, so a Warm racing this rebuild (a new
-- campaign is live in Postgres before Warm installs it, and the reconciler
-- restores live campaigns Redis lacks) cannot install a campaign that
-- admits while the rebuild reads its pending admissions, only for the
-- rebuild to replace it and forget them.
redis.call('HSET', KEYS[1], 'state', 'rebuilding')
return 1
