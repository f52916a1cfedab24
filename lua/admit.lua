-- admit decides one purchase of a seckill campaign in one atomic step, on
-- Redis's own clock, so every API instance agrees on the sale window.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign   hash: stock, seq, begin_ms, end_ms, paused,
--                                               epoch, rid, state
-- KEYS[2] -> <p>seckill:{v<voucher>}:buyers     set of user ids holding a unit
-- KEYS[3] -> <p>seckill:{v<voucher>}:pending    hash: seq -> "<user>:<admitted_ms>"
-- KEYS[4] -> <p>seckill:{v<voucher>}:pending_at zset: seq scored by admitted_ms
-- --
-- ARGV[1] -> user id (a positive decimal integer)
--
-- Returns:
--   {0, id, admitted_ms}   accepted: one unit taken, the user recorded as a
--                          buyer and the admission pending, all at once; id
--                          is epoch * 2^22 + seq, the low 32 bits of the
--                          order id
--   {1}                    the campaign is unknown (not warmed, or lost)
--   {7}                    the campaign must be rebuilt from Postgres before
--                          it admits: its state may be behind what was
--                          acknowledged (state "stale" after a Redis restart
--                          or failover, "rebuilding" while it is rebuilt), it
--                          predates epochs, or its epoch's sequence is used up
--   {2}                    paused
--   {3}                    not started (now < begin_ms)
--   {4}                    ended (now >= end_ms)
--   {5}                    the user holds a unit already
--   {6}                    sold out
-- Errors, before any write: a malformed ARGV[1].
local user = ARGV[1]
if type(user) ~= 'string' or #user > 19 or not string.match(user, '^[1-9]%d*$') then
  return redis.error_reply('ERR admit: ARGV[1] user id must be a positive integer')
end

local c = redis.call('HMGET', KEYS[1], 'stock', 'seq', 'begin_ms', 'end_ms', 'paused', 'epoch', 'state')
if c[7] then
  return {7}
end
local stock, seq = tonumber(c[1]), tonumber(c[2])
local begin_ms, end_ms = tonumber(c[3]), tonumber(c[4])
if not (stock and seq and begin_ms and end_ms) then
  return {1}
end
local epoch = tonumber(c[6])
if not epoch then
  return {7}
end
if c[5] == '1' then
  return {2}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < begin_ms then
  return {3}
end
if now >= end_ms then
  return {4}
end
-- Sold out: a buyer still hears that they bought, so look, without writing.
if stock <= 0 then
  if redis.call('SISMEMBER', KEYS[2], user) == 1 then
    return {5}
  end
  return {6}
end
if seq >= 4194303 then
  if redis.call('SISMEMBER', KEYS[2], user) == 1 then
    return {5}
  end
  return {7}
end
-- SADD is the buyer check: it writes nothing when the user is a buyer.
if redis.call('SADD', KEYS[2], user) == 0 then
  return {5}
end

-- stock and seq were read above, in this same atomic script. Numbers are
-- formatted by hand: Redis may print a Lua number in exponent form.
seq = seq + 1
local id = epoch * 4194304 + seq
local field = string.format('%d', id)
redis.call('HSET', KEYS[1], 'stock', string.format('%d', stock - 1), 'seq', string.format('%d', seq))
redis.call('HSET', KEYS[3], field, string.format('%s:%d', user, now))
redis.call('ZADD', KEYS[4], string.format('%d', now), field)
return {0, id, now}
