-- room_join numbers a buyer who joins a campaign's waiting room, on
-- Redis's own clock: the next of those who joined before the sale opens,
-- or of those after it. Joining again answers the same number. The room
-- keys carry a tag of their own ({w<voucher>}), so a crowd in the room
-- does not load the Redis core that decides the stock.
--
-- KEYS[1] -> <p>seckill:{w<voucher>}:room       hash: before, after (how many joined
--                                               before the open and after it), next
--                                               (the place the next joiner after the
--                                               open takes, at least)
-- KEYS[2] -> <p>seckill:{w<voucher>}:room:u:<b>  hash: user -> their number n (joined
--                                               before the open) or -(p+1), p their
--                                               place (after);
--                                               b is the user's bucket, so that each
--                                               bucket stays a small listpack
-- --
-- ARGV[1] -> user id (a positive decimal integer)
-- ARGV[2] -> when the room opens, Unix milliseconds
-- ARGV[3] -> when the sale opens (begin), Unix milliseconds (>= ARGV[2])
-- ARGV[4] -> when the sale ends, Unix milliseconds (> ARGV[3])
-- ARGV[5] -> the caller's floor of the count before the open (>= 0): a
--            Redis that lost the room numbers new joiners from it on, so no
--            number the caller saw handed out is handed out again
-- ARGV[6] -> the same floor for the count after the open
-- ARGV[7] -> when the keys expire, Unix milliseconds (after ARGV[4])
-- ARGV[8] -> the floor of next (>= 0): the caller's highest place after the
--            open plus one, and the count drawn before the open when known
-- ARGV[9] -> the room's turns a second (>= 1)
--
-- A joiner after the open takes the place max(next, before, the place
-- whose turn is now), so that places are taken once, after every place
-- drawn before the open, and never in the past: a buyer who comes when the
-- line is empty has their turn at once, and turns never come faster than
-- the rate.
--
-- Returns:
--   {0, 1, n}     joined before the open: the n-th (0-based)
--   {0, 0, p}     joined after the open: their place in line
--   {1, wait_ms}  the room opens in wait_ms
--   {2}           the sale is over
-- Errors, before any write: a malformed argument.
local user = ARGV[1]
if type(user) ~= 'string' or #user > 19 or not string.match(user, '^[1-9]%d*$') then
  return redis.error_reply('ERR room_join: ARGV[1] user id must be a positive integer')
end
local opens, begin, ends = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local floor_b, floor_a, expire_at = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
if not (opens and begin and ends and opens <= begin and begin < ends) then
  return redis.error_reply('ERR room_join: ARGV[2..4] must be Unix milliseconds, opens <= begin < end')
end
if not (floor_b and floor_a and floor_b >= 0 and floor_a >= 0 and floor_b % 1 == 0 and floor_a % 1 == 0) then
  return redis.error_reply('ERR room_join: ARGV[5] and ARGV[6] must be whole numbers >= 0')
end
if not (expire_at and expire_at > ends) then
  return redis.error_reply('ERR room_join: ARGV[7] must be after the end')
end
local floor_next, rate = tonumber(ARGV[8]), tonumber(ARGV[9])
if not (floor_next and floor_next >= 0 and floor_next % 1 == 0 and rate and rate >= 1 and rate % 1 == 0) then
  return redis.error_reply('ERR room_join: ARGV[8] must be a whole number >= 0 and ARGV[9] one >= 1')
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < opens then
  return {1, opens - now}
end
if now >= ends then
  return {2}
end
local had = tonumber(redis.call('HGET', KEYS[2], user))
if had then
  if had >= 0 then
    return {0, 1, had}
  end
  return {0, 0, -had - 1}
end
local field, floor, before = 'after', floor_a, 0
if now < begin then
  field, floor, before = 'before', floor_b, 1
end
local n = redis.call('HINCRBY', KEYS[1], field, 1) - 1
if n < floor then
  redis.call('HSET', KEYS[1], field, string.format('%d', floor + 1))
  n = floor
end
local stored = n
if before == 0 then
  -- (now - begin) * rate stays below 2^53 for any window of a day.
  local c = redis.call('HMGET', KEYS[1], 'next', 'before')
  local p = math.max(tonumber(c[1]) or 0, tonumber(c[2]) or 0, floor_next,
    math.floor((now - begin) * rate / 1000))
  redis.call('HSET', KEYS[1], 'next', string.format('%d', p + 1))
  n, stored = p, -p - 1
end
redis.call('HSET', KEYS[2], user, string.format('%d', stored))
redis.call('PEXPIREAT', KEYS[1], string.format('%d', expire_at))
redis.call('PEXPIREAT', KEYS[2], string.format('%d', expire_at))
return {0, before, n}
