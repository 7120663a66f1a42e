-- Make fresh tasks ready in the shops' fair order (queue::fair, docs/design.md, "Shops").
-- KEYS: 1 ready (sorted set: start tag -> member `a:ulid:json`), 2 fair (hash: V, f:<shop>,
--       w:<shop>). ARGV: (shop, weight, member) triples. Returns the number pushed.
local function tag(shop)
  local v = tonumber(redis.call('HGET', KEYS[2], 'V')) or 0
  local f = tonumber(redis.call('HGET', KEYS[2], 'f:' .. shop)) or 0
  local w = tonumber(redis.call('HGET', KEYS[2], 'w:' .. shop)) or 1
  if w < 1 then w = 1 end
  local s = math.max(v, f)
  redis.call('HSET', KEYS[2], 'f:' .. shop, string.format('%.17g', s + 1 / w))
  return s
end
for i = 1, #ARGV, 3 do
  redis.call('HSET', KEYS[2], 'w:' .. ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[1], string.format('%.17g', tag(ARGV[i])), ARGV[i + 2])
end
return #ARGV / 3
