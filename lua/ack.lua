-- ack forgets admissions that Postgres holds now. It is idempotent.
--
-- KEYS[1] -> <p>seckill:{v<voucher>}:pending    hash: seq -> "<user>:<admitted_ms>"
-- KEYS[2] -> <p>seckill:{v<voucher>}:pending_at zset: seq scored by admitted_ms,
--            written by versions before the reconciler read the pending
--            hash's times; removed from here too, so that such a version
--            running beside this one never finds acknowledged entries in it
-- --
-- ARGV[1..n] -> seqs of the admissions (positive decimal integers)
--
-- Returns: how many of them were still pending.
-- Errors, before any write: a malformed seq.
for i = 1, #ARGV do
  local s = ARGV[i]
  if #s > 10 or not string.match(s, '^[1-9]%d*$') then
    return redis.error_reply('ERR ack: ARGV[' .. i .. '] seq must be a positive integer')
  end
end

-- unpack is bounded by the Lua C stack: go in chunks.
local n = 0
for i = 1, #ARGV, 500 do
  local j = math.min(i + 499, #ARGV)
  n = n + redis.call('HDEL', KEYS[1], unpack(ARGV, i, j))
  redis.call('ZREM', KEYS[2], unpack(ARGV, i, j))
end
return n
