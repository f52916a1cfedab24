-- prelude: helpers shared by the campaign scripts. lua.go puts this text
-- between a script's header and its body (Redis scripts cannot import), so
-- every script that uses a helper carries the one copy written here.

-- int returns the decimal integer s if min <= s <= max, else nil.
local function int(s, min, max)
  if type(s) ~= 'string' or #s > 16 or not string.match(s, '^%-?%d+$') then
    return nil
  end
  local n = tonumber(s)
  if n < min or n > max then
    return nil
  end
  return n
end

-- window reads a sale's window and pause from ARGV[i], ARGV[i+1] and
-- ARGV[i+2]: begin_ms (>= 0), end_ms (> begin_ms) and paused ("0" or "1").
-- It returns them, or nil and the error reply's message naming script.
local function window(script, i)
  local begin_ms = int(ARGV[i], 0, 1e15)
  if not begin_ms then
    return nil, string.format('ERR %s: ARGV[%d] begin_ms must be an integer >= 0', script, i)
  end
  local end_ms = int(ARGV[i + 1], 0, 1e15)
  if not end_ms or end_ms <= begin_ms then
    return nil, string.format('ERR %s: ARGV[%d] end_ms must be an integer > begin_ms', script, i + 1)
  end
  local paused = ARGV[i + 2]
  if paused ~= '0' and paused ~= '1' then
    return nil, string.format('ERR %s: ARGV[%d] paused must be 0 or 1', script, i + 2)
  end
  return {begin_ms = begin_ms, end_ms = end_ms, paused = paused}
end

-- campaign reads a campaign's state from ARGV[i] on: stock (0 <= stock <=
-- 10^15), epoch (0 <= epoch < 1024), then its window as window reads it,
-- then, optionally, ARGV[i+5]: the campaign's number of stock shards (1 to
-- 64; absent: 1), which install writes into shard 0's hash when above 1.
-- It returns them, or nil and the error reply's message naming script.
local function campaign(script, i)
  local stock = int(ARGV[i], 0, 1e15)
  if not stock then
    return nil, string.format('ERR %s: ARGV[%d] stock must be an integer >= 0', script, i)
  end
  local epoch = int(ARGV[i + 1], 0, 1023)
  if not epoch then
    return nil, string.format('ERR %s: ARGV[%d] epoch must be an integer in [0, 1024)', script, i + 1)
  end
  local w, err = window(script, i + 2)
  if not w then
    return nil, err
  end
  w.stock, w.epoch, w.shards = stock, epoch, 1
  if ARGV[i + 5] then
    w.shards = int(ARGV[i + 5], 1, 64)
    if not w.shards then
      return nil, string.format('ERR %s: ARGV[%d] shards must be an integer in [1, 64]', script, i + 5)
    end
  end
  return w
end

-- install writes the campaign c, as campaign read it, into the hash key, in
-- a new sequence, stamped with this Redis server's run_id.
local function install(key, c)
  local rid = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
  redis.call('HSET', key,
    'stock', string.format('%d', c.stock),
    'seq', '0',
    'epoch', string.format('%d', c.epoch),
    'begin_ms', string.format('%d', c.begin_ms),
    'end_ms', string.format('%d', c.end_ms),
    'paused', c.paused,
    'rid', rid)
  if c.shards > 1 then
    redis.call('HSET', key, 'shards', string.format('%d', c.shards))
  end
end

-- refusal returns why the campaign hash key may not be changed now: 0 when
-- it does not exist, -1 while it is being rebuilt (rebuild.lua would
-- overwrite the change with what it read from Postgres before); nil when it
-- may.
local function refusal(key)
  local c = redis.call('HMGET', key, 'stock', 'state')
  if not c[1] then
    return 0
  end
  if c[2] == 'rebuilding' then
    return -1
  end
  return nil
end
