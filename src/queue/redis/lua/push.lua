-- Make fresh tasks ready in the shops' fair order (queue::fair, docs/design.md, "Shops").
-- KEYS: 1 ready (sorted set: start tag -> member `a:ulid:json`), 2 fair (hash: V, f:<shop>,
--       w:<shop>). ARGV: (shop, weight, interactive 0/1, member) quadruples. An interactive
-- task's score is its tag less LANE_AHEAD: every interactive task is handed out before every
-- bulk one, in the shops' fair order among themselves (docs/design.md, "Lanes").
-- Returns the number pushed.
local LANE_AHEAD = 1e12
local function tag(shop)
  local v = tonumber(redis.call('HGET', KEYS[2], 'V')) or 0
  local f = tonumber(redis.call('HGET', KEYS[2], 'f:' .. shop)) or 0
  local w = tonumber(redis.call('HGET', KEYS[2], 'w:' .. shop)) or 1
  if w < 1 then w = 1 end
  local s = math.max(v, f)
  redis.call('HSET', KEYS[2], 'f:' .. shop, string.format('%.17g', s + 1 / w))
  return s
end
for i = 1, #ARGV, 4 do
  redis.call('HSET', KEYS[2], 'w:' .. ARGV[i], ARGV[i + 1])
  local score = tag(ARGV[i])
  if ARGV[i + 2] == '1' then score = score - LANE_AHEAD end
  redis.call('ZADD', KEYS[1], string.format('%.17g', score), ARGV[i + 3])
end
return #ARGV / 4
