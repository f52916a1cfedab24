-- retire trims a campaign that ended long ago down to what answering it
-- needs: its hash (window, stock, epoch: purchases still hear ENDED from
-- Redis, and nothing rebuilds it) and its guard stay; its buyers and its
-- returned orders, one member per buyer, go. Nothing is lost: the buyers are
-- in Postgres, and the window check comes before the buyer check, so a
-- campaign past its end never reads them. It does nothing while any
-- admission of the campaign is still pending (not yet persisted) or while
-- the campaign is stopped for a rebuild.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign   hash: ..., end_ms, state
-- KEYS[2] -> <p>seckill:{v<voucher>}:buyers     set of user ids holding a unit
-- KEYS[3] -> <p>seckill:{v<voucher>}:pending    hash of pending admissions
-- KEYS[4] -> <p>seckill:{v<voucher>}:returned   set of orders whose unit came back
-- --
-- ARGV[1] -> after_ms: how long after its end a campaign is trimmed (an
--            integer, at least 0)
--
-- Returns:
--   1 the campaign was trimmed now
--   0 nothing done: it is absent, stopped, not ended long enough, has
--     pending admissions, or was trimmed before
-- Errors, before any write: a malformed ARGV[1].
local after = tonumber(ARGV[1])
if not after or after < 0 or after % 1 ~= 0 then
  return redis.error_reply('ERR retire: ARGV[1] after_ms must be an integer, at least 0')
end
local c = redis.call('HMGET', KEYS[1], 'end_ms', 'state')
local end_ms = tonumber(c[1])
if not end_ms or c[2] then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < end_ms + after or redis.call('HLEN', KEYS[3]) > 0 then
  return 0
end
if redis.call('DEL', KEYS[2], KEYS[4]) > 0 then
  return 1
end
return 0
