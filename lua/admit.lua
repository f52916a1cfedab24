-- admit decides one purchase of a seckill campaign in one atomic step, on
-- Redis's own clock, so every API instance agrees on the sale window. It
-- also enforces, in the same step, the limits every instance shares: the
-- user's attempts at this campaign, the campaign's challenge (each token used
-- once, and a wait after each wrong answer) and the operator's brake on
-- admissions a second.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:campaign   hash: stock, seq, begin_ms, end_ms, paused,
--                                               epoch, rid, state
-- KEYS[2] -> <p>seckill:{v<voucher>}:buyers     set of user ids holding a unit
-- KEYS[3] -> <p>seckill:{v<voucher>}:pending    hash: seq -> "<user>:<admitted_ms>"
-- KEYS[4] -> <p>seckill:{v<voucher>}:pending_at not used: the pending hash's
--                                               values carry the time (the
--                                               reconciler reads them); kept
--                                               so that the KEYS of admit and
--                                               release stay one list
-- KEYS[5] -> <p>seckill:{v<voucher>}:guard      hash: challenge ("NONE", "QUIZ",
--                                               "PROOF_OF_WORK"), brake (admissions a second,
--                                               0: none), room ("1": a purchase needs a
--                                               waiting room's pass); absent: none of them
-- KEYS[6] -> <p>seckill:{v<voucher>}:limit:<user>  the user's GCRA state (a TAT in microseconds)
-- KEYS[7] -> <p>seckill:{v<voucher>}:used:<nonce>  set while the ticket's token is used
-- KEYS[8] -> <p>seckill:{v<voucher>}:brake      the brake's GCRA state
-- KEYS[9] -> <p>seckill:{v<voucher>}:limit:a<address>  the client address's GCRA state
-- KEYS[10] -> <p>seckill:{v<voucher>}:wrong:<user>  hash: n (the user's wrong answers),
--                                               until (Unix ms: no attempt before it);
--                                               read only when the campaign has a challenge
-- --
-- ARGV[1] -> user id (a positive decimal integer)
-- ARGV[2] -> the user's limit: microseconds between attempts (0: no limit)
-- ARGV[3] -> the user's limit: burst (>= 1)
-- ARGV[4] -> ticket: "" (no answer given), "QUIZ" or "PROOF_OF_WORK" (an
--            answer to a token of that kind signed for this user and campaign,
--            not expired: KEYS[7] is its nonce's), "REFUSED" (a token that cannot
--            be trusted: not signed by us, another's, expired)
-- ARGV[5] -> the ticket's expiry, Unix milliseconds ("0" without a token)
-- ARGV[6] -> the address's limit: microseconds between attempts (0: no limit)
-- ARGV[7] -> the address's limit: burst (>= 1)
-- ARGV[8] -> the answer's verdict: "1" it solves the token, "0" it does not
--            (a "QUIZ" or "PROOF_OF_WORK" ticket with "0" spends its token)
-- ARGV[9] -> the wait after the first wrong answer, milliseconds (0: no wait);
--            after the n-th it is ARGV[9] * 2^(n-1), at most ARGV[10]
-- ARGV[10] -> the longest wait, milliseconds (>= ARGV[9])
-- ARGV[11] -> how long KEYS[10] outlives its wait, milliseconds (>= 0): a user
--            whose wait ended that long ago starts from the first wait again
-- ARGV[12] -> optional: "1" when the caller does not know yet how many stock
--            shards the campaign has and sent the purchase to shard 0 (KEYS
--            are shard 0's); absent or "0" otherwise
-- ARGV[13] -> optional: the purchase's waiting-room pass, as the caller
--            checked it: "VALID" (signed for this user and campaign, not
--            expired), "EXPIRED" (theirs, past its time); absent or "" for
--            none (or one not theirs)
--
-- Returns:
--   {0, id, admitted_ms}   accepted: one unit taken, the user recorded as a
--                          buyer and the admission pending, all at once; id
--                          is epoch * 2^22 + seq, the low 32 bits of the
--                          order id
--   {1}                    the campaign is unknown (not warmed, or lost)
--   {13, shards}           ARGV[12] is "1" and the campaign has several stock
--                          shards: nothing was done; send the purchase to the
--                          buyer's shard
--   {7}                    the campaign must be rebuilt from Postgres before
--                          it admits: its state may be behind what was
--                          acknowledged (state "stale" after a Redis restart
--                          or failover, "rebuilding" while it is rebuilt), it
--                          predates epochs, or its epoch's sequence is used up
--   {2}                    paused
--   {3, wait_ms}           not started (now < begin_ms); it opens in wait_ms
--   {4}                    ended (now >= end_ms)
--   {5}                    sold out, and the user holds a unit already
--   {6}                    sold out; both checked right after the window,
--                          before the limits, the waiting room and the
--                          challenge: they take no attempt and spend no token
--   {8}                    rate limited: the user's or the address's limit,
--                          or the brake
--   {8, wait_ms}           rate limited: the user answered wrong and may try
--                          again in wait_ms; checked before anything is taken
--                          from the limits and before the ticket is looked at,
--                          so it takes no attempt and spends no token
--   {14}                   the campaign has a waiting room and ARGV[13] is not
--                          "VALID" or "EXPIRED"; checked after the limits, before
--                          the challenge
--   {15}                   the same with ARGV[13] "EXPIRED"
--   {9}                    the campaign asks for a challenge and none was given
--   {10, wait_ms}          the answer was wrong: its token is spent, and the
--                          user may try again in wait_ms (absent when ARGV[9]
--                          is 0)
--   {10}                   the answer was refused without spending anything:
--                          a ticket of another kind than the campaign's, or
--                          REFUSED
--   {11}                   the ticket's token was used already, whatever the
--                          answer
--   {12}                   the ticket's token expired by Redis's clock
--   {5}                    the user holds a unit already
-- Each attempt inside the window takes one from the user's and the
-- address's limits (from both or, when either has none left, from neither),
-- refused answers included, except a sold-out campaign's and while its user
-- waits after a wrong answer; the attempt that admits takes one from the address's limit only; a token is spent by the first attempt that passes the limit, right
-- or wrong, whatever comes after.
-- Errors, before any write: a malformed argument.
local user = ARGV[1]
if type(user) ~= 'string' or #user > 19 or not string.match(user, '^[1-9]%d*$') then
  return redis.error_reply('ERR admit: ARGV[1] user id must be a positive integer')
end
local user_every = tonumber(ARGV[2])
local user_burst = tonumber(ARGV[3])
if not user_every or user_every < 0 or not user_burst or user_burst < 1 then
  return redis.error_reply('ERR admit: ARGV[2] and ARGV[3] must be a limit (interval >= 0, burst >= 1)')
end
local addr_every = tonumber(ARGV[6])
local addr_burst = tonumber(ARGV[7])
if not addr_every or addr_every < 0 or not addr_burst or addr_burst < 1 then
  return redis.error_reply('ERR admit: ARGV[6] and ARGV[7] must be a limit (interval >= 0, burst >= 1)')
end
local ticket = ARGV[4]
if ticket ~= '' and ticket ~= 'QUIZ' and ticket ~= 'PROOF_OF_WORK' and ticket ~= 'REFUSED' then
  return redis.error_reply('ERR admit: ARGV[4] ticket must be "", QUIZ, PROOF_OF_WORK or REFUSED')
end
local ticket_exp = tonumber(ARGV[5])
if not ticket_exp or ((ticket == 'QUIZ' or ticket == 'PROOF_OF_WORK') and ticket_exp < 1) then
  return redis.error_reply('ERR admit: ARGV[5] must be the ticket expiry in Unix milliseconds')
end
if ARGV[8] ~= '1' and ARGV[8] ~= '0' then
  return redis.error_reply('ERR admit: ARGV[8] verdict must be 1 or 0')
end
if ARGV[12] ~= nil and ARGV[12] ~= '1' and ARGV[12] ~= '0' then
  return redis.error_reply('ERR admit: ARGV[12] must be 1 or 0 when given')
end
local pass = ARGV[13] or ''
if pass ~= '' and pass ~= 'VALID' and pass ~= 'EXPIRED' then
  return redis.error_reply('ERR admit: ARGV[13] pass must be "", VALID or EXPIRED')
end
local solved = ARGV[8] == '1'
local wait_base, wait_max, wait_keep = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
if not wait_base or wait_base < 0 or wait_base % 1 ~= 0 or not wait_max or wait_max < wait_base or wait_max % 1 ~= 0
    or not wait_keep or wait_keep < 0 or wait_keep % 1 ~= 0 then
  return redis.error_reply('ERR admit: ARGV[9], ARGV[10] and ARGV[11] must be whole milliseconds, 0 <= ARGV[9] <= ARGV[10]')
end

-- gcra_peek looks at the generic cell rate algorithm's state in key (the
-- theoretical arrival time, microseconds) with every microseconds between
-- attempts and bursts of burst: the state after one more attempt, or false
-- when there is none to take. It writes nothing; gcra_take does.
local function gcra_peek(key, now_us, every, burst)
  local tat = tonumber(redis.call('GET', key)) or now_us
  if tat < now_us then
    tat = now_us
  end
  local new_tat = tat + every
  if new_tat - now_us > every * burst then
    return false
  end
  return new_tat
end

local function gcra_take(key, now_us, new_tat)
  redis.call('SET', key, string.format('%d', math.floor(new_tat)), 'PX',
    string.format('%d', math.floor((new_tat - now_us) / 1000) + 1))
end

local function gcra(key, now_us, every, burst)
  local new_tat = gcra_peek(key, now_us, every, burst)
  if not new_tat then
    return false
  end
  gcra_take(key, now_us, new_tat)
  return true
end

local c = redis.call('HMGET', KEYS[1], 'stock', 'seq', 'begin_ms', 'end_ms', 'paused', 'epoch', 'state', 'shards')
if c[7] then
  return {7}
end
local stock, seq = tonumber(c[1]), tonumber(c[2])
local begin_ms, end_ms = tonumber(c[3]), tonumber(c[4])
if not (stock and seq and begin_ms and end_ms) then
  return {1}
end
local shards = tonumber(c[8]) or 1
if ARGV[12] == '1' and shards > 1 then
  return {13, shards}
end
local epoch = tonumber(c[6])
if not epoch then
  return {7}
end
if c[5] == '1' then
  return {2}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
if now < begin_ms then
  return {3, begin_ms - now}
end
if now >= end_ms then
  return {4}
end
-- Sold out: a buyer still hears that they bought, so look, without writing.
-- Before the limits, the waiting room and the challenge, as the process's
-- sold-out mark answers without asking Redis at all: a sold-out campaign's
-- refusals, most of a sale's attempts until every process holds the mark,
-- read two keys and write none.
if stock <= 0 then
  if redis.call('SISMEMBER', KEYS[2], user) == 1 then
    return {5}
  end
  return {6}
end

local user_tat, addr_tat
if user_every > 0 then
  user_tat = gcra_peek(KEYS[6], now_us, user_every, user_burst)
  if not user_tat then
    return {8}
  end
end
if addr_every > 0 then
  addr_tat = gcra_peek(KEYS[9], now_us, addr_every, addr_burst)
  if not addr_tat then
    return {8}
  end
end
-- A user waiting after a wrong answer is refused before anything is taken
-- or spent. A campaign without a challenge reads no more than before: its
-- guard is read anyway.
local g = redis.call('HMGET', KEYS[5], 'challenge', 'brake', 'room')
local challenge = g[1] or 'NONE'
local wrongs = 0
if challenge ~= 'NONE' then
  local w = redis.call('HMGET', KEYS[10], 'n', 'until')
  local until_ms = tonumber(w[2]) or 0
  if now < until_ms then
    return {8, until_ms - now}
  end
  wrongs = tonumber(w[1]) or 0
end
-- The user's attempt is taken from their limit on every answer but the one
-- that admits them: that happens once a user and campaign, so it costs the
-- limit nothing to skip, and a new buyer's admission writes no limit cell
-- (the commonest attempt of a sale writes one key fewer, and leaves none to
-- expire).
local function refuse(reply)
  if user_tat then
    gcra_take(KEYS[6], now_us, user_tat)
  end
  return reply
end
if addr_tat then
  gcra_take(KEYS[9], now_us, addr_tat)
end
if g[3] == '1' and pass ~= 'VALID' then
  if pass == 'EXPIRED' then
    return refuse({15})
  end
  return refuse({14})
end
if ticket == 'REFUSED' then
  return refuse({10})
end
if challenge ~= 'NONE' then
  if ticket == '' then
    return refuse({9})
  end
  if ticket ~= challenge then
    return refuse({10})
  end
  if ticket_exp <= now then
    return refuse({12})
  end
  -- The first answer spends the token, right or wrong: a second one hears
  -- that it was used, whatever it says.
  if not redis.call('SET', KEYS[7], '1', 'NX', 'PXAT', string.format('%d', ticket_exp)) then
    return refuse({11})
  end
  if not solved then
    if wait_base == 0 then
      return refuse({10})
    end
    -- base * 2^(n-1), at most the longest: past 2^40 the cap has won.
    local n = wrongs + 1
    local wait = wait_max
    if n <= 40 then
      wait = math.min(wait_base * 2 ^ (n - 1), wait_max)
    end
    local until_ms = now + wait
    redis.call('HSET', KEYS[10], 'n', string.format('%d', n), 'until', string.format('%d', until_ms))
    redis.call('PEXPIREAT', KEYS[10], string.format('%d', until_ms + wait_keep))
    return refuse({10, wait})
  end
elseif not solved then
  return refuse({10})
end
if seq >= 4194303 then
  if redis.call('SISMEMBER', KEYS[2], user) == 1 then
    return refuse({5})
  end
  return refuse({7})
end
local brake = tonumber(g[2]) or 0
if brake > 0 then
  if redis.call('SISMEMBER', KEYS[2], user) == 1 then
    return refuse({5})
  end
  if not gcra(KEYS[8], now_us, 1000000 / brake, math.max(1, math.ceil(brake / 10))) then
    return refuse({8})
  end
end
-- SADD is the buyer check: it writes nothing when the user is a buyer.
if redis.call('SADD', KEYS[2], user) == 0 then
  return refuse({5})
end

-- stock and seq were read above, in this same atomic script. Numbers are
-- formatted by hand: Redis may print a Lua number in exponent form.
seq = seq + 1
local id = epoch * 4194304 + seq
local field = string.format('%d', id)
redis.call('HSET', KEYS[1], 'stock', string.format('%d', stock - 1), 'seq', string.format('%d', seq))
redis.call('HSET', KEYS[3], field, string.format('%s:%d', user, now))
return {0, id, now}
