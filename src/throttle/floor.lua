-- Today's counters raised to at least what the ledger counted (docs/design.md, "Beyond one
-- Redis"): state that lost writes (a failover to a replica that lacked the last second, a
-- restarted Redis) must not count fewer calls than the platform did, or the daily quota and
-- pacing would spend the same calls twice.
-- KEYS: 1 the gate's quota counter of the day, 2 its booked counter, 3 the app's booked counter.
-- ARGV: 1 the gate's calls in the ledger today, 2 the app's (every gate of the platform),
--       3 the counters' ttl (s).
-- Returns how many counters were raised.
local ttl = tonumber(ARGV[3])
local raised = 0
local function floor(key, n)
  if n <= 0 then return end
  local cur = tonumber(redis.call('GET', key)) or 0
  if n > cur then
    redis.call('SET', key, n, 'EX', ttl)
    raised = raised + 1
  end
end
floor(KEYS[1], tonumber(ARGV[1]) or 0)
floor(KEYS[2], tonumber(ARGV[1]) or 0)
floor(KEYS[3], tonumber(ARGV[2]) or 0)
return raised
