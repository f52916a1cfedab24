-- return gives a cancelled or expired order's unit back to its campaign and
-- frees its buyer's slot, once per order: the order id is recorded in a set
-- beside the campaign, so a second call (a retry, the sweep, a race) changes
-- nothing. Postgres took the unit back first, in the epoch (of the order's
-- stock shard, whose keys these are) given in
-- ARGV[3]; a state Redis installed in a later epoch was read from Postgres
-- after that and counts the unit already.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign  hash: stock, epoch, state, ...
-- KEYS[2] -> <p>seckill:{v<voucher>}:buyers    set of user ids holding a unit
-- KEYS[3] -> <p>seckill:{v<voucher>}:returned  set of order ids (low 32 bits) given back
-- --
-- ARGV[1] -> id: the low 32 bits of the order id (a positive decimal integer)
-- ARGV[2] -> user id of the order (a positive decimal integer)
-- ARGV[3] -> epoch: the shard's epoch when Postgres took the unit back
--
-- Returns:
--   1  returned now: stock + 1, the user is no longer a buyer
--   0  returned before (nothing changed)
--   2  counted already: Redis holds no state of the campaign (the rebuild
--      that installs it reads Postgres) or one of a later epoch
--   -1 not now: the campaign is being rebuilt, must be rebuilt, or is in an
--      earlier epoch than Postgres; try again after its rebuild
-- Errors, before any write: a malformed argument.
local id, user = ARGV[1], ARGV[2]
if type(id) ~= 'string' or #id > 10 or not string.match(id, '^[1-9]%d*$') then
  return redis.error_reply('ERR return: ARGV[1] id must be a positive integer')
end
if type(user) ~= 'string' or #user > 19 or not string.match(user, '^[1-9]%d*$') then
  return redis.error_reply('ERR return: ARGV[2] user id must be a positive integer')
end
local epoch = ARGV[3]
if type(epoch) ~= 'string' or #epoch > 4 or not string.match(epoch, '^%d+$') or tonumber(epoch) > 1023 then
  return redis.error_reply('ERR return: ARGV[3] epoch must be an integer in [0, 1024)')
end
epoch = tonumber(epoch)

if redis.call('SISMEMBER', KEYS[3], id) == 1 then
  return 0
end
local c = redis.call('HMGET', KEYS[1], 'stock', 'epoch', 'state')
if not c[1] then
  return 2
end
if c[3] or not c[2] then
  return -1
end
local current = tonumber(c[2])
if current > epoch then
  return 2
end
if current < epoch then
  return -1
end
redis.call('SADD', KEYS[3], id)
redis.call('SREM', KEYS[2], user)
redis.call('HINCRBY', KEYS[1], 'stock', 1)
return 1
