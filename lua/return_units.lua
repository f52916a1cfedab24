-- return_units gives the units of cancelled or expired orders of one
-- campaign back and frees their buyers' slots, once per order, in one step:
-- a batch that Postgres closed in one transaction (the workers' expiry), or
-- the cancellations gathered while the last call ran (one order when
-- alone). Each order id is recorded in the set beside the campaign, so an
-- order returned before (a retry, the sweep, a race with another call) is
-- skipped. Postgres took the units back
-- in the epoch given in ARGV[1] (of the orders' stock shard, whose keys
-- these are; the caller groups them by shard and epoch); a state Redis installed in a later
-- epoch was read from Postgres after that and counts them already.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign  hash: stock, epoch, state, ...
-- KEYS[2] -> <p>seckill:{v<voucher>}:buyers    set of user ids holding a unit
-- KEYS[3] -> <p>seckill:{v<voucher>}:returned  set of order ids (low 32 bits) given back
-- --
-- ARGV[1] -> epoch: the shard's epoch when Postgres took the units back
-- ARGV[2], ARGV[3] -> the first order: the low 32 bits of its id, and its
--            user id (positive decimal integers)
-- ARGV[4], ARGV[5] -> the second order, and so on: 1 to 1000 orders
--
-- Returns:
--   {1, n}  returned: stock + n, the n orders not returned before freed
--           their buyers (n may be 0)
--   {2}     counted already: Redis holds no state of the campaign (the
--           rebuild that installs it reads Postgres) or one of a later epoch
--   {-1}    not now: the campaign is being rebuilt, must be rebuilt, or is
--           in an earlier epoch than Postgres; try again after its rebuild
-- Errors, before any write: a malformed argument.
local epoch = ARGV[1]
if type(epoch) ~= 'string' or #epoch > 4 or not string.match(epoch, '^%d+$') or tonumber(epoch) > 1023 then
  return redis.error_reply('ERR return_units: ARGV[1] epoch must be an integer in [0, 1024)')
end
epoch = tonumber(epoch)
local pairs = (#ARGV - 1) / 2
if pairs < 1 or pairs > 1000 or pairs % 1 ~= 0 then
  return redis.error_reply('ERR return_units: give 1 to 1000 orders, each an id and a user id')
end
for i = 2, #ARGV, 2 do
  local id, user = ARGV[i], ARGV[i + 1]
  if type(id) ~= 'string' or #id > 10 or not string.match(id, '^[1-9]%d*$') then
    return redis.error_reply(string.format('ERR return_units: ARGV[%d] id must be a positive integer', i))
  end
  if type(user) ~= 'string' or #user > 19 or not string.match(user, '^[1-9]%d*$') then
    return redis.error_reply(string.format('ERR return_units: ARGV[%d] user id must be a positive integer', i + 1))
  end
end

local c = redis.call('HMGET', KEYS[1], 'stock', 'epoch', 'state')
if not c[1] then
  return {2}
end
if c[3] or not c[2] then
  return {-1}
end
local current = tonumber(c[2])
if current > epoch then
  return {2}
end
if current < epoch then
  return {-1}
end
local n = 0
for i = 2, #ARGV, 2 do
  if redis.call('SADD', KEYS[3], ARGV[i]) == 1 then
    redis.call('SREM', KEYS[2], ARGV[i + 1])
    n = n + 1
  end
end
if n > 0 then
  redis.call('HINCRBY', KEYS[1], 'stock', n)
end
return {1, n}
