-- move_out is the first step of a move of units between two stock shards of
-- one campaign (admission/shards.go): it takes up to n units from the donor
-- shard's stock and records the move, in the donor's hash tag, atomically.
-- Until the record is cleared (HDEL, once move_in.lua applied it) the units
-- are in the record: counted by nobody's stock, kept by the record, which
-- the reconciler finishes if the mover dies. A move id is used once: a
-- second call with it answers what the first recorded.
--
-- KEYS[1] -> <p>seckill:{<donor tag>}:campaign  hash: stock, epoch, state, moved, ...
-- KEYS[2] -> <p>seckill:{<donor tag>}:moves     hash: move id ->
--            "<to>:<n>:<epoch>:<ms>:<to epoch>" (records written before
--            shards had epochs of their own lack the last field: the
--            recipient was in the donor's epoch)
-- --
-- ARGV[1] -> move id: 1 to 64 letters, digits, "-" or "_"
-- ARGV[2] -> n: units wanted (1 to 10^15)
-- ARGV[3] -> to: the recipient shard (0 to 63)
-- ARGV[4] -> to epoch: the epoch the recipient was in when the mover looked
--            (0 to 1023); move_in.lua applies the move only in it (absent:
--            the donor's)
--
-- Returns:
--   {m, to epoch}  m units taken and recorded (0: the donor has none;
--               nothing recorded), for the recipient in to epoch; for a
--               move id recorded before, what it recorded
--   {-1}        the donor is absent or stopped (state set): nothing moves
-- Errors, before any write: a malformed argument.
local id, to = ARGV[1], tonumber(ARGV[3])
if type(id) ~= 'string' or #id < 1 or #id > 64 or not string.match(id, '^[%w_-]+$') then
  return redis.error_reply('ERR move_out: ARGV[1] move id must be 1 to 64 letters, digits, - or _')
end
local n = tonumber(ARGV[2])
if not n or n < 1 or n > 1e15 or n % 1 ~= 0 then
  return redis.error_reply('ERR move_out: ARGV[2] n must be an integer in [1, 10^15]')
end
if not to or to < 0 or to > 63 or to % 1 ~= 0 then
  return redis.error_reply('ERR move_out: ARGV[3] to must be a shard in [0, 63]')
end
local to_epoch = ARGV[4]
if to_epoch ~= nil then
  to_epoch = tonumber(to_epoch)
  if not to_epoch or to_epoch < 0 or to_epoch > 1023 or to_epoch % 1 ~= 0 then
    return redis.error_reply('ERR move_out: ARGV[4] to epoch must be an integer in [0, 1024)')
  end
end
local rec = redis.call('HGET', KEYS[2], id)
if rec then
  local _, m, e, _, te = string.match(rec, '^(%d+):(%d+):(%d+):(%d+):?(%d*)$')
  return {tonumber(m), tonumber(te) or tonumber(e)}
end
local c = redis.call('HMGET', KEYS[1], 'stock', 'epoch', 'state')
local stock, epoch = tonumber(c[1]), tonumber(c[2])
if not stock or not epoch or c[3] then
  return {-1}
end
to_epoch = to_epoch or epoch
local m = math.min(n, stock)
if m <= 0 then
  return {0, to_epoch}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'stock', string.format('%d', stock - m))
redis.call('HINCRBY', KEYS[1], 'moved', 1)
redis.call('HSET', KEYS[2], id, string.format('%d:%d:%d:%d:%d', to, m, epoch, now, to_epoch))
return {m, to_epoch}
