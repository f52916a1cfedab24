-- update changes the window and the pause of an existing campaign.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign   hash: stock, seq, begin_ms, end_ms, paused, state
-- --
-- ARGV[1] -> begin_ms: start of the sale, Unix milliseconds (>= 0)
-- ARGV[2] -> end_ms: end of the sale, Unix milliseconds (> begin_ms)
-- ARGV[3] -> paused: "0" or "1"
--
-- Returns:
--   1 updated
--   0 the campaign does not exist; nothing changed
--  -1 the campaign is being rebuilt (rebuild.lua would overwrite the change
--     with what it read from Postgres before); nothing changed
-- Errors, before any write: any malformed argument.
local function int(s, min, max)
  if type(s) ~= 'string' or #s > 16 or not string.match(s, '^%-?%d+$') then
    return nil
  end
  local n = tonumber(s)
  if n < min or n > max then
    return nil
  end
  return n
end

local begin_ms = int(ARGV[1], 0, 1e15)
if not begin_ms then
  return redis.error_reply('ERR update: ARGV[1] begin_ms must be an integer >= 0')
end
local end_ms = int(ARGV[2], 0, 1e15)
if not end_ms or end_ms <= begin_ms then
  return redis.error_reply('ERR update: ARGV[2] end_ms must be an integer > begin_ms')
end
local paused = ARGV[3]
if paused ~= '0' and paused ~= '1' then
  return redis.error_reply('ERR update: ARGV[3] paused must be 0 or 1')
end

local c = redis.call('HMGET', KEYS[1], 'stock', 'state')
if not c[1] then
  return 0
end
if c[2] == 'rebuilding' then
  return -1
end
redis.call('HSET', KEYS[1],
  'begin_ms', string.format('%d', begin_ms),
  'end_ms', string.format('%d', end_ms),
  'paused', paused)
return 1
