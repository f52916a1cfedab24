-- add_stock puts more units of an existing campaign on sale.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign   hash: stock, ..., state
-- --
-- ARGV[1] -> n: units to add (integer, 1 <= n <= 10^12)
--
-- Returns:
--   the new stock (>= 1)
--   0 the campaign does not exist; nothing changed
--  -1 the campaign is being rebuilt (rebuild.lua would overwrite the change
--     with what it read from Postgres before); nothing changed
-- Errors, before any write: a malformed n.
-- Uses: prelude.lua (refusal), which lua.go puts here.
local n = ARGV[1]
if type(n) ~= 'string' or #n > 13 or not string.match(n, '^[1-9]%d*$') or tonumber(n) > 1e12 then
  return redis.error_reply('ERR add_stock: ARGV[1] n must be an integer in [1, 10^12]')
end

local refused = refusal(KEYS[1])
if refused then
  return refused
end
return redis.call('HINCRBY', KEYS[1], 'stock', n)
