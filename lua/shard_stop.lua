-- shard_stop stops one stock shard of a campaign of several (admission's
-- rebuild.go). With a token it is part of a rebuild of the whole campaign,
-- whose lock shard 0 holds: it sets state "rebuilding" and records the
-- token, so that only that rebuild installs the shard again
-- (shard_install.lua); it creates the hash when the shard lost it, which
-- then admits nobody either. Without a token it marks an admitting shard
-- 0 "recount" because the whole campaign must be rebuilt (every shard
-- lost, an epoch's sequence used up, or the units of shards rebuilt alone
-- to count back), so that rebuild_begin.lua takes the lock for it.
--
-- KEYS[1] -> <p>seckill:{<tag>}:campaign  hash: stock, ..., state, rebuild_token
-- --
-- ARGV[1] -> token: the rebuild's token (1 to 64 characters), or "" to mark
--            shard 0 "recount"
-- ARGV[2] -> only if, optional, without a token: "recount" marks shard 0
--            only while its hash still says units are to be counted back
--            (rebuild_begin.lua): a process that saw the campaign empty a
--            moment ago does not stop it again after another process's
--            recount
--
-- Returns:
--   1 stopped now
--   0 nothing changed (without a token: absent or stopped already)
-- Errors, before any write: a malformed argument.
local token = ARGV[1]
if type(token) ~= 'string' or #token > 64 then
  return redis.error_reply('ERR shard_stop: ARGV[1] token must have at most 64 characters')
end
local only = ARGV[2]
if only ~= nil and only ~= 'recount' then
  return redis.error_reply('ERR shard_stop: ARGV[2] must be "recount" or absent')
end
if token == '' then
  local c = redis.call('HMGET', KEYS[1], 'stock', 'state', 'recount')
  if not c[1] or c[2] or (only and not c[3]) then
    return 0
  end
  redis.call('HSET', KEYS[1], 'state', 'recount')
  return 1
end
redis.call('HSET', KEYS[1], 'state', 'rebuilding', 'rebuild_token', token)
return 1
