-- stamp stops a campaign whose state this Redis server did not install: the
-- server restarted (it may have come back without its last writes) or a
-- replica took over (it may have missed the master's last writes). The
-- campaign admits nobody until it is rebuilt from Postgres. A process runs
-- it for every campaign the first time it connects to a server it has not
-- seen before, before it sends anything else on that connection.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign   hash: ..., rid, state
-- --
-- ARGV[1] -> the run_id of this server (INFO server), 40 hex digits
--
-- Returns:
--   1 the campaign was stopped now
--   0 the campaign is this server's, stopped already, or absent
-- Errors, before any write: a malformed ARGV[1].
local rid = ARGV[1]
if type(rid) ~= 'string' or not string.match(rid, '^%x+$') or #rid ~= 40 then
  return redis.error_reply('ERR stamp: ARGV[1] must be a run_id of 40 hex digits')
end
local c = redis.call('HMGET', KEYS[1], 'rid', 'state', 'stock')
if not c[3] or c[2] or c[1] == rid then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'stale')
return 1
