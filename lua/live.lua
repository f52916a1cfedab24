-- live reads a campaign's units left and admissions pending at one instant
-- (an admission moves a unit from one to the other atomically). It is a
-- script, not MULTI/EXEC, so that one pipeline reads many campaigns on a
-- Redis Cluster, where a transaction may not span slots. For a campaign of
-- several stock shards it reads one shard, and counts as left the units of
-- moves out of it that are recorded in its epoch (on their way to another
-- shard: move_out.lua). A recorded move that its recipient applied already
-- (move_in.lua), before the record was cleared, is in the recipient's stock
-- too: the script answers the recorded moves and the ids the shard applied,
-- so that the caller, which reads every shard, counts each move once.
--
-- KEYS[1] -> <p>seckill:{<tag>}:campaign   hash: stock, epoch, ...
-- KEYS[2] -> <p>seckill:{<tag>}:pending    hash: id -> "<user>:<admitted_ms>"
-- KEYS[3] -> <p>seckill:{<tag>}:moves      hash: move id -> "<to>:<n>:<epoch>:<ms>[:<to epoch>]"
-- KEYS[4] -> <p>seckill:{<tag>}:moved_in   set of move ids applied here
--            (KEYS[3] and KEYS[4] optional: given for a shard of a campaign
--            of several)
-- ARGV: none
--
-- Returns: { stock (plus units on their way out) or -1 when Redis does not
-- hold the campaign, pending count, epoch, seq (admissions in the epoch) },
-- and for a shard of a campaign of several three more: { id, to, n, to
-- epoch, ... } of the moves recorded in its epoch (those counted in the
-- first), the ids in moved_in (every move applied here in this epoch), and
-- 1 when the hash is marked "recount" (shard 0 after a rebuild of some
-- shards: units to count back from Postgres), else 0.
local c = redis.call('HMGET', KEYS[1], 'stock', 'epoch', 'seq', 'recount')
local stock = tonumber(c[1])
local out = {}
if stock and KEYS[3] then
  local epoch = tonumber(c[2])
  local recs = redis.call('HGETALL', KEYS[3])
  for i = 1, #recs, 2 do
    local to, n, e, _, te = string.match(recs[i + 1], '^(%d+):(%d+):(%d+):(%d+):?(%d*)$')
    if n and tonumber(e) == epoch then
      stock = stock + tonumber(n)
      out[#out + 1] = recs[i]
      out[#out + 1] = tonumber(to)
      out[#out + 1] = tonumber(n)
      out[#out + 1] = tonumber(te) or tonumber(e)
    end
  end
end
local reply = { stock or -1, redis.call('HLEN', KEYS[2]), tonumber(c[2]) or -1, tonumber(c[3]) or 0 }
if KEYS[3] then
  reply[5] = out
  reply[6] = KEYS[4] and redis.call('SMEMBERS', KEYS[4]) or {}
  reply[7] = c[4] == '1' and 1 or 0
end
return reply
