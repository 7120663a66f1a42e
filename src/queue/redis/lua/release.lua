local n = 0
for i = 3, #ARGV, 3 do
  local id = ARGV[i]
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
  if p[1] and p[1][2] == ARGV[2] then
    redis.call('XADD', KEYS[1], '*', 'd', ARGV[i + 1], 'a', ARGV[i + 2])
    redis.call('XACK', KEYS[1], ARGV[1], id)
    redis.call('XDEL', KEYS[1], id)
    n = n + 1
  end
end
return n
