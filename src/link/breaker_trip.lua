-- A fleet breaker trips open for everyone.
-- KEYS[1] open key. ARGV: 1 open ms, 2 holder. Never shortens a longer open period.
local left = redis.call('PTTL', KEYS[1])
if left < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[1])
  return tonumber(ARGV[1])
end
return left
