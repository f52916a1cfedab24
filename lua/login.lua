-- login takes one sign-in attempt from every budget in KEYS at once, from all
-- or from none (or only checks whether it would fit). Each budget is a GCRA
-- bucket on Redis's clock: it holds burst attempts and gets one back every
-- interval_ms. The dashboard uses it for the budget of one user name from one
-- address together with the address's own (both keys carry the address in
-- their hash tag, so they share one Redis Cluster slot), and alone for a user
-- name's wrong passwords.
--
-- KEYS[1] -> a budget: <p>seckill:login:{a<address>}:user:<hash> with KEYS[2], or
--            <p>seckill:login:{u<hash>}:failures alone
-- KEYS[2] -> optional, another budget: <p>seckill:login:{a<address>}:address
--            (each is a string, the budget's theoretical arrival time in ms)
-- --
-- ARGV[1] -> "take" (take the attempt when it fits) or "check" (never write)
-- ARGV[2i] -> interval_ms of KEYS[i] (integer, 1 <= v <= 10^10)
-- ARGV[2i+1] -> burst of KEYS[i] (integer, 1 <= v <= 10^6)
--
-- Returns:
--   0              the attempt fits every budget (and is taken, with "take")
--   retry_ms > 0   a budget is spent: nothing is taken; every budget has an
--                  attempt again in retry_ms
-- Errors, before any write: no key, a wrong number of arguments, a malformed
-- argument.
local mode = ARGV[1]
if mode ~= 'take' and mode ~= 'check' then
  return redis.error_reply('ERR login: ARGV[1] must be "take" or "check"')
end
if #KEYS < 1 or #ARGV ~= 1 + 2 * #KEYS then
  return redis.error_reply('ERR login: want one key or more and an interval and a burst for each')
end

local function int(i, max)
  local v = ARGV[i]
  if type(v) ~= 'string' or #v > 11 or not string.match(v, '^[1-9]%d*$') or tonumber(v) > max then
    return nil
  end
  return tonumber(v)
end

local budgets = {}
for i = 1, #KEYS do
  local interval, burst = int(2 * i, 1e10), int(2 * i + 1, 1e6)
  if not (interval and burst) then
    return redis.error_reply('ERR login: ARGV[' .. (2 * i) .. '] and ARGV[' .. (2 * i + 1) ..
      '] must be an interval in [1, 10^10] ms and a burst in [1, 10^6]')
  end
  budgets[i] = {key = KEYS[i], interval = interval, burst = burst}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- An attempt fits a budget when its arrival time, one interval on, is at
-- most burst - 1 intervals ahead of now.
local retry = 0
for _, b in ipairs(budgets) do
  local tat = math.max(tonumber(redis.call('GET', b.key)) or now, now)
  b.tat = tat + b.interval
  local wait = b.tat - b.burst * b.interval - now
  if wait > retry then
    retry = wait
  end
end
if retry > 0 or mode == 'check' then
  return retry
end

for _, b in ipairs(budgets) do
  redis.call('SET', b.key, string.format('%d', b.tat), 'PX', string.format('%d', b.tat - now))
end
return 0
