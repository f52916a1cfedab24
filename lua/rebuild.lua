-- rebuild installs a campaign's state as Postgres holds it, in a new epoch,
-- and ends the rebuild that rebuild_begin.lua started. The caller has
-- persisted every admission that was still pending, and has written the
-- buyers Postgres knows into a staging set, which becomes the buyers set.
-- The staging set expires (so that one a dead process left goes away) and
-- RENAME keeps a key's expiry: the buyers set is made to never expire, or
-- every buyer could buy again once it did (issue #21).
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
-- KEYS[7] -> <p>seckill:{v<voucher>}:moves          hash of moves out of shard 0,
-- KEYS[8] -> <p>seckill:{v<voucher>}:moved_in       set of moves applied to it
--            (KEYS[7] and KEYS[8] optional: given for a campaign of several
--            shards; what they held is of an earlier epoch, which the
--            rebuild counted from Postgres)
-- --
-- ARGV[1] -> token: the lock holder's token
-- ARGV[2] -> stock: units left to sell (integer, 0 <= stock <= 10^15)
-- ARGV[3] -> epoch: the new epoch, taken in Postgres (0 <= epoch < 1024)
-- ARGV[4] -> begin_ms: start of the sale, Unix milliseconds (>= 0)
-- ARGV[5] -> end_ms: end of the sale, Unix milliseconds (> begin_ms)
-- ARGV[6] -> paused: "0" or "1"
-- ARGV[7] -> shards: the campaign's stock shards (1 to 64), optional (absent: 1);
--            above 1 it is written into the hash (shard 0's)
--
-- Returns:
--   1 installed; the lock is released
--   0 the lock is not ours (it expired, and another process took it);
--     nothing changed
-- Errors, before any write: any malformed argument.
-- Uses: prelude.lua (campaign, install), which lua.go puts here.
local token = ARGV[1]
if type(token) ~= 'string' or #token < 1 or #token > 64 then
  return redis.error_reply('ERR rebuild: ARGV[1] token must have 1 to 64 characters')
end
local c, err = campaign('rebuild', 2)
if not c then
  return redis.error_reply(err)
end

if redis.call('GET', KEYS[5]) ~= token then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
if KEYS[8] then
  redis.call('DEL', KEYS[7], KEYS[8])
end
if redis.call('EXISTS', KEYS[6]) == 1 then
  redis.call('RENAME', KEYS[6], KEYS[2])
  redis.call('PERSIST', KEYS[2])
end
install(KEYS[1], c)
return 1
