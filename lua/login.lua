-- login takes one sign-in attempt from every budget in KEYS at once, from all
-- or from none (or only checks whether it would fit, or hands one back). Each
-- budget is a GCRA bucket on Redis's clock: it holds burst attempts and gets
-- one back every interval_ms. The dashboard uses it for the budget of one
-- user name from one address together with the address's own (both keys
-- carry the address in their hash tag, so they share one Redis Cluster slot),
-- and alone for a user name's wrong passwords. A failure mark of the pair
-- (same slot) may follow the budgets: with "take" the attempt is refused
-- while it exists (the name is under attack and this pair has failed on it);
-- with "give" it is deleted (a right password forgets the pair's failures).
--
-- KEYS[1] -> a budget: <p>seckill:login:{a<address>}:user:<hash> with KEYS[2], or
--            <p>seckill:login:{u<hash>}:failures alone
-- KEYS[2] -> optional, another budget: <p>seckill:login:{a<address>}:address
--            (each budget is a string, its theoretical arrival time in ms)
-- KEYS[3] -> optional, when ARGV[2] is "1", the last key: the pair's failure mark
--            <p>seckill:login:{a<address>}:failed:<hash> (any string, with a TTL)
-- --
-- ARGV[1] -> "take" (take the attempt when it fits and no mark exists),
--            "check" (never write) or "give" (hand one attempt back to every
--            budget and delete the mark)
-- ARGV[2] -> marks: "0" or "1", whether the last key is a failure mark
-- ARGV[2i+1] -> interval_ms of budget KEYS[i] (integer, 1 <= v <= 10^10)
-- ARGV[2i+2] -> burst of budget KEYS[i] (integer, 1 <= v <= 10^6)
--
-- Returns:
--   0              the attempt fits every budget and no mark exists (and is
--                  taken, with "take"); always 0 with "give"
--   retry_ms > 0   a budget is spent: nothing is taken; every budget has an
--                  attempt again in retry_ms; or the mark exists, for retry_ms
-- Errors, before any write: no key, a wrong number of arguments, a malformed
-- argument.
local mode = ARGV[1]
if mode ~= 'take' and mode ~= 'check' and mode ~= 'give' then
  return redis.error_reply('ERR login: ARGV[1] must be "take", "check" or "give"')
end
local marks = ARGV[2]
if marks ~= '0' and marks ~= '1' then
  return redis.error_reply('ERR login: ARGV[2] must be "0" or "1"')
end
marks = tonumber(marks)
local n = #KEYS - marks
if n < 1 or #ARGV ~= 2 + 2 * n then
  return redis.error_reply('ERR login: want one budget or more, an interval and a burst for each, and at most one mark')
end

local function int(i, max)
  local v = ARGV[i]
  if type(v) ~= 'string' or #v > 11 or not string.match(v, '^[1-9]%d*$') or tonumber(v) > max then
    return nil
  end
  return tonumber(v)
end

local budgets = {}
for i = 1, n do
  local interval, burst = int(2 * i + 1, 1e10), int(2 * i + 2, 1e6)
  if not (interval and burst) then
    return redis.error_reply('ERR login: ARGV[' .. (2 * i + 1) .. '] and ARGV[' .. (2 * i + 2) ..
      '] must be an interval in [1, 10^10] ms and a burst in [1, 10^6]')
  end
  budgets[i] = {key = KEYS[i], interval = interval, burst = burst}
end
local mark = nil
if marks == 1 then
  mark = KEYS[#KEYS]
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

if mode == 'give' then
  for _, b in ipairs(budgets) do
    local tat = tonumber(redis.call('GET', b.key))
    if tat then
      tat = tat - b.interval
      if tat > now then
        redis.call('SET', b.key, string.format('%d', tat), 'PX', string.format('%d', tat - now))
      else
        redis.call('DEL', b.key)
      end
    end
  end
  if mark then
    redis.call('DEL', mark)
  end
  return 0
end

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
if retry > 0 then
  return retry
end
if mark then
  -- A mark without a TTL (-1) is not one of ours: it refuses nothing.
  local ttl = redis.call('PTTL', mark)
  if ttl > 0 then
    return ttl
  end
end
if mode == 'check' then
  return 0
end

for _, b in ipairs(budgets) do
  redis.call('SET', b.key, string.format('%d', b.tat), 'PX', string.format('%d', b.tat - now))
end
return 0
