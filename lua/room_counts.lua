-- room_counts reads how many joined a campaign's waiting room before the
-- sale opened and after, and whether the open has passed by Redis's clock
-- (then no one joins before it any more: the count before is final). It
-- writes nothing.
--
-- KEYS[1] -> <p>seckill:{w<voucher>}:room  hash: before, after, next
-- --
-- ARGV[1] -> when the sale opens (begin), Unix milliseconds
--
-- Returns: {before, after, opened, next}, opened 1 when Redis's clock is at
-- or past ARGV[1], 0 before; a room Redis does not hold counts 0s.
local begin = tonumber(ARGV[1])
if not begin then
  return redis.error_reply('ERR room_counts: ARGV[1] must be Unix milliseconds')
end
local c = redis.call('HMGET', KEYS[1], 'before', 'after', 'next')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local opened = 0
if now >= begin then
  opened = 1
end
return {tonumber(c[1]) or 0, tonumber(c[2]) or 0, opened, tonumber(c[3]) or 0}
