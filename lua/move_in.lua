-- move_in is the second step of a move of units between two stock shards
-- (move_out.lua is the first): it adds the units a move took from its
-- donor to the recipient shard's stock, once per move id (recorded in a set
-- in the recipient's hash tag), and only in the epoch the mover saw the
-- recipient in: a recipient rebuilt since (another epoch) or stopped counts
-- from Postgres, where the units never left (at once, or by the recount),
-- so it takes nothing. The donor's
-- record is cleared after this (HDEL), by the mover or the reconciler.
--
-- KEYS[1] -> <p>seckill:{<recipient tag>}:campaign  hash: stock, epoch, state, ...
-- KEYS[2] -> <p>seckill:{<recipient tag>}:moved_in  set of move ids applied here
-- --
-- ARGV[1] -> move id, as move_out.lua recorded it
-- ARGV[2] -> m: the units it took (1 to 10^15)
-- ARGV[3] -> epoch: the recipient's epoch the move was recorded for (0 to
--            1023)
--
-- Returns:
--   1  applied now: stock + m
--   0  applied before: nothing changed
--   -1 not now: the recipient is absent, stopped or in another epoch;
--      nothing changed (a rebuild of the campaign recounts the units)
-- Errors, before any write: a malformed argument.
local id = ARGV[1]
if type(id) ~= 'string' or #id < 1 or #id > 64 or not string.match(id, '^[%w_-]+$') then
  return redis.error_reply('ERR move_in: ARGV[1] move id must be 1 to 64 letters, digits, - or _')
end
local m, epoch = tonumber(ARGV[2]), tonumber(ARGV[3])
if not m or m < 1 or m > 1e15 or m % 1 ~= 0 then
  return redis.error_reply('ERR move_in: ARGV[2] m must be an integer in [1, 10^15]')
end
if not epoch or epoch < 0 or epoch > 1023 or epoch % 1 ~= 0 then
  return redis.error_reply('ERR move_in: ARGV[3] epoch must be an integer in [0, 1024)')
end
local c = redis.call('HMGET', KEYS[1], 'stock', 'epoch', 'state')
if not c[1] or c[3] or tonumber(c[2]) ~= epoch then
  return -1
end
if redis.call('SADD', KEYS[2], id) == 0 then
  return 0
end
redis.call('HINCRBY', KEYS[1], 'stock', string.format('%d', m))
return 1
