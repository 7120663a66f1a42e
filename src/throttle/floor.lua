-- Today's counters brought back to what the ledger counted (docs/design.md, "Beyond one
-- Redis"): state that lost writes (a restarted Redis, a failover to a replica that lacked the
-- last writes) must not count fewer calls than the platform did, or the daily quota and pacing
-- would spend the same calls twice. Only ever up.
-- KEYS: the counters (of one slot: a gate's quota and booked counters, or the app's).
-- ARGV: for each KEYS[i], two counts: ARGV[2i-1] every call the ledger holds for today,
--       ARGV[2i] the calls of today's minutes that ended over two minutes ago (their outcomes
--       have reached Redis by now); then the counters' ttl (s).
-- A missing counter is set to the first (it was lost whole); one below the second is raised
-- to it. A counter between the two is left alone: the calls of the last minutes may still be
-- on their way from the workers' report batches, and raising it to them would count them twice.
-- Returns how many counters were raised.
local ttl = tonumber(ARGV[2 * #KEYS + 1])
local raised = 0
for i, key in ipairs(KEYS) do
  local all = tonumber(ARGV[2 * i - 1]) or 0
  local settled = tonumber(ARGV[2 * i]) or 0
  local cur = tonumber(redis.call('GET', key))
  local want = nil
  if cur == nil then
    if all > 0 then want = all end
  elseif settled > cur then
    want = settled
  end
  if want then
    redis.call('SET', key, want, 'EX', ttl)
    raised = raised + 1
  end
end
return raised
