-- rebuild installs a campaign's state as Postgres holds it, in a new epoch,
-- and ends the rebuild that rebuild_begin.lua started. The caller has
-- persisted every admission that was still pending, and has written the
-- buyers Postgres knows into a staging set, which becomes the buyers set.
-- Everything of the campaign from before is replaced: admissions Redis lost
-- are not in Postgres either, so their units are for sale again.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign       hash: stock, seq, begin_ms, end_ms, paused,
--                                                   epoch, rid
-- KEYS[2] -> <p>seckill:{v<voucher>}:buyers         set of user ids holding a unit
-- KEYS[3] -> <p>seckill:{v<voucher>}:pending        hash of pending admissions
-- KEYS[4] -> <p>seckill:{v<voucher>}:pending_at     zset of pending admissions
-- KEYS[5] -> <p>seckill:{v<voucher>}:rebuild        string: the lock holder's token
-- KEYS[6] -> <p>seckill:{v<voucher>}:buyers_staged  set: the buyers to install
-- --
-- ARGV[1] -> token: the lock holder's token
-- ARGV[2] -> stock: units left to sell (integer, 0 <= stock <= 10^15)
-- ARGV[3] -> epoch: the new epoch, taken in Postgres (0 <= epoch < 1024)
-- ARGV[4] -> begin_ms: start of the sale, Unix milliseconds (>= 0)
-- ARGV[5] -> end_ms: end of the sale, Unix milliseconds (> begin_ms)
-- ARGV[6] -> paused: "0" or "1"
--
-- Returns:
--   1 installed; the lock is released
--   0 the lock is not ours (it expired, and another process took it);
--     nothing changed
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

local token = ARGV[1]
if type(token) ~= 'string' or #token < 1 or #token > 64 then
  return redis.error_reply('ERR rebuild: ARGV[1] token must have 1 to 64 characters')
end
local stock = int(ARGV[2], 0, 1e15)
if not stock then
  return redis.error_reply('ERR rebuild: ARGV[2] stock must be an integer >= 0')
end
local epoch = int(ARGV[3], 0, 1023)
if not epoch then
  return redis.error_reply('ERR rebuild: ARGV[3] epoch must be an integer in [0, 1024)')
end
local begin_ms = int(ARGV[4], 0, 1e15)
if not begin_ms then
  return redis.error_reply('ERR rebuild: ARGV[4] begin_ms must be an integer >= 0')
end
local end_ms = int(ARGV[5], 0, 1e15)
if not end_ms or end_ms <= begin_ms then
  return redis.error_reply('ERR rebuild: ARGV[5] end_ms must be an integer > begin_ms')
end
local paused = ARGV[6]
if paused ~= '0' and paused ~= '1' then
  return redis.error_reply('ERR rebuild: ARGV[6] paused must be 0 or 1')
end

if redis.call('GET', KEYS[5]) ~= token then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
if redis.call('EXISTS', KEYS[6]) == 1 then
  redis.call('RENAME', KEYS[6], KEYS[2])
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
