-- A fleet-wide lease (one holder at a time: the breaker's half-open probe).
-- KEYS[1] lease. ARGV: 1 holder, 2 ttl ms. Take it if free, renew it if ours.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
