-- live reads a campaign's units left and admissions pending at one instant
-- (an admission moves a unit from one to the other atomically). It is a
-- script, not MULTI/EXEC, so that one pipeline reads many campaigns on a
-- Redis Cluster, where a transaction may not span slots. For a campaign of
-- several stock shards it reads one shard, and counts as left the units of
-- moves out of it that are recorded in its epoch (on their way to another
-- shard: move_out.lua).
--
-- KEYS[1] -> <p>seckill:{<tag>}:campaign   hash: stock, epoch, ...
-- KEYS[2] -> <p>seckill:{<tag>}:pending    hash: id -> "<user>:<admitted_ms>"
-- KEYS[3] -> <p>seckill:{<tag>}:moves      hash: move id -> "<to>:<n>:<epoch>:<ms>"
--            (optional: given for a shard of a campaign of several)
-- ARGV: none
--
-- Returns: { stock (plus units on their way out) or -1 when Redis does not
-- hold the campaign, pending count, epoch, seq (admissions in the epoch) }
local c = redis.call('HMGET', KEYS[1], 'stock', 'epoch', 'seq')
local stock = tonumber(c[1])
if stock and KEYS[3] then
  local epoch = tonumber(c[2])
  for _, rec in ipairs(redis.call('HVALS', KEYS[3])) do
    local _, n, e = string.match(rec, '^(%d+):(%d+):(%d+):')
    if n and tonumber(e) == epoch then
      stock = stock + tonumber(n)
    end
  end
end
return { stock or -1, redis.call('HLEN', KEYS[2]), tonumber(c[2]) or -1, tonumber(c[3]) or 0 }
