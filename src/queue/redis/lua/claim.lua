local max = tonumber(ARGV[5])
local want = tonumber(ARGV[4])
local cursor = ARGV[7]
local claimed, dead = {}, {}
for _ = 1, 10 do
  local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), cursor, 'COUNT', want - #claimed / 3)
  cursor = r[1]
  for _, e in ipairs(r[2]) do
    local id = e[1]
    local f = e[2]
    if f then
      local d, a = '', 0
      for i = 1, #f, 2 do
        if f[i] == 'd' then d = f[i + 1] elseif f[i] == 'a' then a = tonumber(f[i + 1]) or 0 end
      end
      local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
      local dc = 1
      if p[1] then dc = tonumber(p[1][4]) end
      local attempt = a + dc
      if attempt > max then
        redis.call('XADD', KEYS[2], 'MAXLEN', '=', tonumber(ARGV[6]), '*', 'd', d, 'attempts', tostring(attempt - 1),
          'error', 'worker lost (no heartbeat) on every attempt', 'worker', ARGV[2])
        redis.call('XACK', KEYS[1], ARGV[1], id)
        redis.call('XDEL', KEYS[1], id)
        dead[#dead + 1] = d
        dead[#dead + 1] = tostring(attempt - 1)
      else
        claimed[#claimed + 1] = id
        claimed[#claimed + 1] = d
        claimed[#claimed + 1] = tostring(attempt)
      end
    end
  end
  if cursor == '0-0' or #claimed / 3 >= want then break end
end
local out = {cursor, tostring(#claimed / 3)}
for _, v in ipairs(claimed) do out[#out + 1] = v end
for _, v in ipairs(dead) do out[#out + 1] = v end
return out
