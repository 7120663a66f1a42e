-- Today's counters raised to at least what the ledger counted (docs/design.md, "Beyond one
-- Redis"): state that lost writes (a failover to a replica that lacked the last second, a
-- restarted Redis) must not count fewer calls than the platform did, or the daily quota and
-- pacing would spend the same calls twice. Only ever up.
-- KEYS: the counters (of one slot: a gate's quota and booked counters, or the app's).
-- ARGV: the count each KEYS[i] is raised to, then the counters' ttl (s).
-- Returns how many counters were raised.
local ttl = tonumber(ARGV[#KEYS + 1])
local raised = 0
for i, key in ipairs(KEYS) do
  local n = tonumber(ARGV[i]) or 0
  local cur = tonumber(redis.call('GET', key)) or 0
  if n > 0 and n > cur then
    redis.call('SET', key, n, 'EX', ttl)
    raised = raised + 1
  end
end
return raised
