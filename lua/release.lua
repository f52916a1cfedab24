-- release gives a failed admission's unit (and, unless told to keep it, its
-- buyer slot) back. It acts only
-- while the admission is pending, so releasing twice (or concurrently) gives
-- back exactly one unit.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign   hash: stock, ...
-- KEYS[2] -> <p>seckill:{v<voucher>}:buyers     set of user ids
-- KEYS[3] -> <p>seckill:{v<voucher>}:pending    hash: seq -> "<user>:<admitted_ms>"
-- KEYS[4] -> <p>seckill:{v<voucher>}:pending_at zset: seq scored by admitted_ms,
--            written by earlier versions (see ack.lua); removed here too
-- --
-- ARGV[1] -> seq of the admission (a positive decimal integer)
-- ARGV[2] -> user id of the admission (a positive decimal integer)
-- ARGV[3] -> "1" to keep the user among the buyers (they hold another
--            order), "0" to free their slot
--
-- Returns:
--   1  released: pending entry removed, user removed from buyers (unless
--      ARGV[3] is "1"), stock + 1
--      (stock only while the campaign hash exists)
--   0  the admission was not pending (acknowledged or released before)
--   -1 the admission is pending for another user; nothing changed
-- Errors, before any write: a malformed argument.
local seq, user, keep = ARGV[1], ARGV[2], ARGV[3]
if type(seq) ~= 'string' or #seq > 10 or not string.match(seq, '^[1-9]%d*$') then
  return redis.error_reply('ERR release: ARGV[1] seq must be a positive integer')
end
if type(user) ~= 'string' or #user > 19 or not string.match(user, '^[1-9]%d*$') then
  return redis.error_reply('ERR release: ARGV[2] user id must be a positive integer')
end
if keep ~= '0' and keep ~= '1' then
  return redis.error_reply('ERR release: ARGV[3] keep must be 0 or 1')
end

local v = redis.call('HGET', KEYS[3], seq)
if not v then
  return 0
end
if string.match(v, '^(%d+):') ~= user then
  return -1
end
redis.call('HDEL', KEYS[3], seq)
redis.call('ZREM', KEYS[4], seq)
if keep == '0' then
  redis.call('SREM', KEYS[2], user)
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'stock', 1)
end
return 1
