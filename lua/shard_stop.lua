-- shard_stop stops one stock shard of a campaign of several (admission's
-- rebuild.go). With a token it is part of a rebuild of the whole campaign,
-- whose lock shard 0 holds: it sets state "rebuilding" and records the
-- token, so that only that rebuild installs the shard again
-- (shard_install.lua); it creates the hash when the shard lost it, which
-- then admits nobody either. Without a token it marks an admitting shard
-- 0 "stale" because another shard must be rebuilt, so that rebuild_begin.lua
-- takes the lock for the campaign.
--
-- KEYS[1] -> <p>seckill:{<tag>}:campaign  hash: stock, ..., state, rebuild_token
-- --
-- ARGV[1] -> token: the rebuild's token (1 to 64 characters), or "" to mark
--            stale
--
-- Returns:
--   1 stopped now
--   0 nothing changed (without a token: absent or stopped already)
-- Errors, before any write: a malformed argument.
local token = ARGV[1]
if type(token) ~= 'string' or #token > 64 then
  return redis.error_reply('ERR shard_stop: ARGV[1] token must have at most 64 characters')
end
if token == '' then
  local c = redis.call('HMGET', KEYS[1], 'stock', 'state')
  if not c[1] or c[2] then
    return 0
  end
  redis.call('HSET', KEYS[1], 'state', 'stale')
  return 1
end
redis.call('HSET', KEYS[1], 'state', 'rebuilding', 'rebuild_token', token)
return 1
