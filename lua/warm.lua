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
-- ARGV[6] -> shards: the campaign's stock shards (1 to 64), optional (absent: 1);
--            above 1 it is written into the hash (shard 0's)
--
-- Returns:
--   1 the campaign was installed
--   0 the campaign exists already; nothing changed
-- Errors, before any write: any malformed argument.
-- Uses: prelude.lua (campaign, install), which lua.go puts here.
local c, err = campaign('warm', 1)
if not c then
  return redis.error_reply(err)
end

if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
install(KEYS[1], c)
return 1
