-- Promote due delayed tasks into the ready set (each tagged as it becomes ready), hand out
-- the smallest start tags first (queue::fair: the shops' weighted fair order, docs/design.md,
-- "Shops"), then read new entries for this consumer.
-- KEYS: 1 stream, 2 delayed, 3 ready, 4 fair. ARGV: group, consumer, count, promote_batch,
-- interactive only ('1': the worker's slots are all held; only an interactive task may take
-- the slot kept for one, and nothing is read unless one is ready).
-- Returns flat [id, d, attempt, ...]. Interactive tasks score LANE_AHEAD below their tag
-- (push.lua); handing one out leaves V alone.
local LANE_AHEAD = 1e12
local function tag(shop)
  local v = tonumber(redis.call('HGET', KEYS[4], 'V')) or 0
  local f = tonumber(redis.call('HGET', KEYS[4], 'f:' .. shop)) or 0
  local w = tonumber(redis.call('HGET', KEYS[4], 'w:' .. shop)) or 1
  if w < 1 then w = 1 end
  local s = math.max(v, f)
  redis.call('HSET', KEYS[4], 'f:' .. shop, string.format('%.17g', s + 1 / w))
  return s
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
for _, m in ipairs(due) do
  local a, d = string.match(m, '^(%d+):%w+:(.*)$')
  if a then
    local shop = ''
    local ahead = 0
    local ok, msg = pcall(cjson.decode, d)
    if ok and type(msg) == 'table' then
      if type(msg.shop) == 'string' then shop = msg.shop end
      if msg.lane == 'interactive' then ahead = LANE_AHEAD end
    end
    redis.call('ZADD', KEYS[3], string.format('%.17g', tag(shop) - ahead), m)
  end
  redis.call('ZREM', KEYS[2], m)
end
if ARGV[5] == '1' then
  local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if not first[2] or tonumber(first[2]) > -LANE_AHEAD / 2 then return {} end
end
local ready = redis.call('ZPOPMIN', KEYS[3], tonumber(ARGV[3]))
local v = tonumber(redis.call('HGET', KEYS[4], 'V')) or 0
for i = 1, #ready, 2 do
  local a, d = string.match(ready[i], '^(%d+):%w+:(.*)$')
  if a then redis.call('XADD', KEYS[1], '*', 'd', d, 'a', a) end
  local s = tonumber(ready[i + 1])
  if s > v then v = s end
end
if #ready > 0 then redis.call('HSET', KEYS[4], 'V', string.format('%.17g', v)) end
local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', tonumber(ARGV[3]), 'STREAMS', KEYS[1], '>')
local out = {}
if r then
  for _, e in ipairs(r[1][2]) do
    local f = e[2]
    local d, a = '', 0
    for i = 1, #f, 2 do
      if f[i] == 'd' then d = f[i + 1] elseif f[i] == 'a' then a = tonumber(f[i + 1]) or 0 end
    end
    out[#out + 1] = e[1]
    out[#out + 1] = d
    out[#out + 1] = tostring(a + 1)
  end
end
return out
