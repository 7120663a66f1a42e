local cs = redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
local n = 0
for _, c in ipairs(cs) do
  local name, pending, idle = nil, 1, 0
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1]
    elseif c[i] == 'pending' then pending = c[i + 1]
    elseif c[i] == 'idle' then idle = c[i + 1] end
  end
  if name and name ~= ARGV[3] and pending == 0 and idle > tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
    n = n + 1
  end
end
return n
