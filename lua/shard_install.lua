-- shard_install installs one stock shard of a campaign as a rebuild read it
-- from Postgres, in the rebuild's new epoch, if the shard is still stopped
-- by that rebuild (shard_stop.lua recorded its token): what rebuild.lua
-- does for shard 0 in a rebuild of the whole campaign, whose lock fences
-- the others. A rebuild of some shards (those a failover lost) installs
-- each of them here, shard 0 too, with no units. Everything the shard held
-- is replaced; moves recorded in it are of an earlier epoch, and their
-- units are counted from Postgres (at once, or by the recount).
--
-- KEYS[1] -> <p>seckill:{<tag>}:campaign       hash: stock, seq, begin_ms, end_ms, paused,
--                                              epoch, rid, state, rebuild_token
-- KEYS[2] -> <p>seckill:{<tag>}:buyers         set of user ids holding a unit
-- KEYS[3] -> <p>seckill:{<tag>}:pending        hash of pending admissions
-- KEYS[4] -> <p>seckill:{<tag>}:pending_at     zset of pending admissions
-- KEYS[5] -> <p>seckill:{<tag>}:buyers_staged  set: the buyers to install
-- KEYS[6] -> <p>seckill:{<tag>}:moves          hash of moves out of the shard
-- KEYS[7] -> <p>seckill:{<tag>}:moved_in       set of moves applied to the shard
-- --
-- ARGV[1] -> token: the rebuild's token
-- ARGV[2] -> stock: the shard's units (integer, 0 <= stock <= 10^15)
-- ARGV[3] -> epoch: the new epoch (0 <= epoch < 1024)
-- ARGV[4] -> begin_ms, ARGV[5] -> end_ms, ARGV[6] -> paused: the window
-- ARGV[7] -> shards: the campaign's stock shards, optional; given for shard
--            0, whose hash says how many there are
-- ARGV[8] -> recount, optional: "1" marks the hash "recount" (shard 0 of a
--            rebuild of some shards: rebuild_begin.lua)
--
-- Returns:
--   1 installed
--   0 the shard is not stopped by this rebuild; nothing changed
-- Errors, before any write: any malformed argument.
-- Uses: prelude.lua (campaign, install), which lua.go puts here.
local token = ARGV[1]
if type(token) ~= 'string' or #token < 1 or #token > 64 then
  return redis.error_reply('ERR shard_install: ARGV[1] token must have 1 to 64 characters')
end
local c, err = campaign('shard_install', 2)
if not c then
  return redis.error_reply(err)
end
if ARGV[8] ~= nil and ARGV[8] ~= '0' and ARGV[8] ~= '1' then
  return redis.error_reply('ERR shard_install: ARGV[8] recount must be 0 or 1')
end
if redis.call('HGET', KEYS[1], 'rebuild_token') ~= token then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6], KEYS[7])
if redis.call('EXISTS', KEYS[5]) == 1 then
  redis.call('RENAME', KEYS[5], KEYS[2])
end
install(KEYS[1], c)
if ARGV[8] == '1' then
  redis.call('HSET', KEYS[1], 'recount', '1')
end
return 1
