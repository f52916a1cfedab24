-- update changes the window and the pause of an existing campaign.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign   hash: stock, seq, begin_ms, end_ms, paused, state
-- --
-- ARGV[1] -> begin_ms: start of the sale, Unix milliseconds (>= 0)
-- ARGV[2] -> end_ms: end of the sale, Unix milliseconds (> begin_ms)
-- ARGV[3] -> paused: "0" or "1"
--
-- Returns:
--   1 updated
--   0 the campaign does not exist; nothing changed
--  -1 the campaign is being rebuilt (rebuild.lua would overwrite the change
--     with what it read from Postgres before); nothing changed
-- Errors, before any write: any malformed argument.
-- Uses: prelude.lua (window, refusal), which lua.go puts here.
local w, err = window('update', 1)
if not w then
  return redis.error_reply(err)
end

local refused = refusal(KEYS[1])
if refused then
  return refused
end
redis.call('HSET', KEYS[1],
  'begin_ms', string.format('%d', w.begin_ms),
  'end_ms', string.format('%d', w.end_ms),
  'paused', w.paused)
return 1
