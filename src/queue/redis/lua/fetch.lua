local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
for _, m in ipairs(due) do
  local a, d = string.match(m, '^(%d+):%w+:(.*)$')
  if a then redis.call('XADD', KEYS[1], '*', 'd', d, 'a', a) end
  redis.call('ZREM', KEYS[2], m)
end
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
