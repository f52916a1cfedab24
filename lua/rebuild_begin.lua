-- rebuild_begin takes a campaign's rebuild lock and stops its admissions, so
-- that one process at a time rebuilds it from Postgres (rebuild.lua ends it).
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign   hash: ..., state
-- KEYS[2] -> <p>seckill:{v<voucher>}:rebuild    string: the holder's token
-- --
-- ARGV[1] -> token: the holder's random token (1 to 64 characters)
-- ARGV[2] -> ttl_ms: how long the lock lives unless ended (1000 to 600000)
--
-- Returns:
--   1 the lock is ours; the campaign (if Redis holds it) has state
--     "rebuilding" and admits nobody until rebuild.lua installs it again
--   0 another process holds the lock; nothing changed
-- Errors, before any write: any malformed argument.
local token, ttl = ARGV[1], tonumber(ARGV[2])
if type(token) ~= 'string' or #token < 1 or #token > 64 then
  return redis.error_reply('ERR rebuild_begin: ARGV[1] token must have 1 to 64 characters')
end
if not ttl or ttl < 1000 or ttl > 600000 or ttl % 1 ~= 0 then
  return redis.error_reply('ERR rebuild_begin: ARGV[2] ttl_ms must be an integer in [1000, 600000]')
end
if not redis.call('SET', KEYS[2], token, 'NX', 'PX', string.format('%d', ttl)) then
  return 0
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'state', 'rebuilding')
end
return 1
