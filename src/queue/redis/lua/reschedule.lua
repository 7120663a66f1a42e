if ARGV[5] ~= '' then
  local p = redis.call('XPENDING', KEYS[1], ARGV[3], ARGV[5], ARGV[5], 1)
  if not p[1] or p[1][2] ~= ARGV[4] then return 0 end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]), ARGV[2])
if ARGV[5] ~= '' then
  redis.call('XACK', KEYS[1], ARGV[3], ARGV[5])
  redis.call('XDEL', KEYS[1], ARGV[5])
end
return 1
