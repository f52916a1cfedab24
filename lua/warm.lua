-- warm installs a campaign unless Redis holds it already. The caller adds the
-- campaign's buyers to its buyers set BEFORE running this script, so the
-- campaign never admits a user who holds a unit. It records the run_id of
-- this Redis server beside the state: after a restart or a failover the id
-- differs, and the campaign is rebuilt before it admits again (stamp.lua).
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign   hash: stock, seq, begin_ms, end_ms, paused,
--                                               epoch, rid
-- --
-- ARGV[1] -> stock: units left to sell (integer, 0 <= stock <= 10^15)
-- ARGV[2] -> epoch: the campaign's order id epoch in Postgres (0 <= epoch < 1024)
-- ARGV[3] -> begin_ms: start of the sale, Unix milliseconds (>= 0)
-- ARGV[4] -> end_ms: end of the sale, Unix milliseconds (> begin_ms)
-- ARGV[5] -> paused: "0" or "1"
--
-- Returns:
--   1 the campaign was installed
--   0 the campaign exists already; nothing changed
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

local stock = int(ARGV[1], 0, 1e15)
if not stock then
  return redis.error_reply('ERR warm: ARGV[1] stock must be an integer >= 0')
end
local epoch = int(ARGV[2], 0, 1023)
if not epoch then
  return redis.error_reply('ERR warm: ARGV[2] epoch must be an integer in [0, 1024)')
end
local begin_ms = int(ARGV[3], 0, 1e15)
if not begin_ms then
  return redis.error_reply('ERR warm: ARGV[3] begin_ms must be an integer >= 0')
end
local end_ms = int(ARGV[4], 0, 1e15)
if not end_ms or end_ms <= begin_ms then
  return redis.error_reply('ERR warm: ARGV[4] end_ms must be an integer > begin_ms')
end
local paused = ARGV[5]
if paused ~= '0' and paused ~= '1' then
  return redis.error_reply('ERR warm: ARGV[5] paused must be 0 or 1')
end

if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local rid = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
redis.call('HSET', KEYS[1],
  'stock', string.format('%d', stock),
  'seq', '0',
  'epoch', string.format('%d', epoch),
  'begin_ms', string.format('%d', begin_ms),
  'end_ms', string.format('%d', end_ms),
  'paused', paused,
  'rid', rid)
return 1
