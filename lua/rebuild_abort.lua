-- rebuild_abort ends a rebuild that failed halfway (rebuild_begin.lua took
-- the lock, rebuild.lua never ran): it releases the lock if it is still the
-- caller's, so that the next attempt, in any process, need not wait for the
-- lock to expire. The campaign keeps its state "rebuilding": it admits
-- nobody until a rebuild installs it.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:rebuild    string: the holder's token
-- KEYS[2] -> <p>seckill:{v<voucher>}:campaign   hash: ..., recount; only
--            with ARGV[2]
-- --
-- ARGV[1] -> token: the holder's token (1 to 64 characters)
-- ARGV[2] -> optional: "recount" also takes back the "recount" mark that
--            the holder's rebuild_begin.lua set (it answered 3): nobody else
--            sets or clears it while the lock is held
--
-- Returns:
--   1 the lock was the caller's and is released
--   0 the lock is another's or gone; nothing changed
-- Errors, before any write: a malformed argument.
local token = ARGV[1]
if type(token) ~= 'string' or #token < 1 or #token > 64 then
  return redis.error_reply('ERR rebuild_abort: ARGV[1] token must have 1 to 64 characters')
end
local unmark = ARGV[2]
if unmark ~= nil and (unmark ~= 'recount' or KEYS[2] == nil) then
  return redis.error_reply('ERR rebuild_abort: ARGV[2] must be "recount", with KEYS[2], or absent')
end
if redis.call('GET', KEYS[1]) ~= token then
  return 0
end
redis.call('DEL', KEYS[1])
if unmark then
  redis.call('HDEL', KEYS[2], 'recount')
end
return 1
