-- live reads a campaign's units left and admissions pending at one instant
-- (an admission moves a unit from one to the other atomically). It is a
-- script, not MULTI/EXEC, so that one pipeline reads many campaigns on a
-- Redis Cluster, where a transaction may not span slots.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign   hash: stock, ...
-- KEYS[2] -> <p>seckill:{v<voucher>}:pending    hash: id -> "<user>:<admitted_ms>"
-- ARGV: none
--
-- Returns: { stock or -1 when Redis does not hold the campaign, pending count }
local stock = redis.call('HGET', KEYS[1], 'stock')
return { tonumber(stock) or -1, redis.call('HLEN', KEYS[2]) }
