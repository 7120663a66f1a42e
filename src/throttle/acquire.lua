-- GCRA reservation for one gate, on the Redis server's clock. One call per acquisition.
-- KEYS: 1 bucket (hash: tat, iv), 2 aimd (hash: rate, ...), 3 pause (hash: until, reason),
--       4 conf (hash: rate, burst; set by `syncfleet gate set`). All share one hash tag.
-- ARGV: 1 configured rate (/s), 2 configured burst, 3 max wait (us),
--       4 optional "now" in us (tests only; empty = TIME), 5 boundary band (ms),
--       6 the lane's share of the gate (1 = all of it; docs/design.md, "Lanes": with a share
--         kept for interactive work, each lane books in a bucket of its own at its share of
--         the rate, burst and ceiling, so bulk bookings never queue interactive calls),
--       7 1 for a bulk call (paced by the daily budgets), 0 for an interactive one,
--       8 pacing (0 spend, 1 even), 9 the gate's daily quota (0 = none),
--       10 the app's daily quota (0 = none), 11 the day's length (ms), 12 the interactive share,
--       13 booked-counter ttl (s),
--       14 '1' when the call was booked and counted already (a late waker booking again:
--          throttle::Gates::acquire): neither the daily budgets nor their counters again,
--       15 the shop a bulk call is for, 16 its weight, 17 the index in KEYS of the shares
--          (0 = no share kept: an interactive call, or a call of no shop).
-- KEYS (from ARGV[17] on): the shops booking lately (sorted set, shop -> until when it
--       counts), their weights, `_sum` their sum and `t:<shop>` each one's next turn (hash).
-- Fair shares (docs/design.md, "Fair shares at the gate"): while other shops book too and
-- calls are booked ahead, a shop books at its weighted part of the rate (its turns spaced
-- by the interval x the sum of the weights / its weight); a call further ahead of its shop's
-- pace than a lead (200 ms, or one turn) gets code 4 with the wait until it is within it.
-- KEYS: 5 the gate's calls counted today (report.lua), 6 the gate's calls booked today,
--       7 the app's calls booked today (every gate of the platform; only with an app quota).
-- The day as a budget (throttle::pacing, docs/design.md, "Pacing"): a bulk call under a spent
-- budget is paused until the day's end; one ahead of the `even` line books at the budget's
-- pace (quota / day) instead of the gate's rate. Every booking counts in KEYS[6] (and [7]).
-- The bucket hash also counts the calls reserved to leave in one clock second of the server
-- (fields sec, sent): the fleet's send-time check (throttle::second_guard, docs/design.md,
-- "Gates"), at no extra round trip.
-- Returns {code, wait_us, reason, rate, booked second}: code 0 = go now, 1 = go after wait_us
--         (reserved), 2 = not taken, retry after wait_us, 3 = paused for wait_us (reason); the
--         booked clock second (s, server clock) lets a worker that wakes too late book again.
if redis.replicate_commands then pcall(redis.replicate_commands) end -- Redis < 5: TIME then writes
local now
if ARGV[4] and ARGV[4] ~= '' then
  now = tonumber(ARGV[4])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(x) return string.format('%.0f', x) end

local p = redis.call('HMGET', KEYS[3], 'until', 'reason')
local pu = tonumber(p[1])
if pu and pu > now then
  return {3, math.floor(pu - now), p[2] or 'paused', '0', '0'}
end

local conf = redis.call('HMGET', KEYS[4], 'rate', 'burst')
local base = tonumber(conf[1]) or tonumber(ARGV[1])
local burst = tonumber(conf[2]) or tonumber(ARGV[2])
local max_wait = tonumber(ARGV[3])
-- Floor of the adaptive rate: throttle::aimd::min_rate_for.
local min_rate = math.min(math.max(base * 0.02, 0.1), base)

local st = redis.call('HMGET', KEYS[2], 'rate', 'confirmed', 'ceiling')
local rate = tonumber(st[1]) or base
if rate > base then rate = base end
if rate < min_rate then rate = min_rate end
local iv = 1000000 / rate
-- The burst follows the adaptive rate: a gate configured 10x too high that learned a lower
-- rate must not keep a burst sized for the configured one (it would overrun the platform's
-- window at every refill). At least one call.
burst = burst * rate / base
-- Never more than the headroom under a measured ceiling the rate runs under
-- (throttle::aimd::burst_under): a burst on top of 99% of a sliding window is a rejection.
local ceiling = tonumber(st[3])
if ceiling and ceiling >= rate and ceiling - rate < burst then burst = ceiling - rate end
if burst < 1 then burst = 1 end
-- Probing above a measured ceiling: one call at a time (throttle::aimd).
if st[2] then burst = 1 end
-- This lane's part of the gate.
local part = tonumber(ARGV[6]) or 1
if part > 0 and part < 1 then
  rate = rate * part
  burst = math.max(1, burst * part)
  if ceiling then ceiling = ceiling * part end
  iv = 1000000 / rate
end

-- Pacing of bulk work by the gate's and the app's daily budgets (throttle::pacing::bulk_turn).
local bulk = ARGV[7] == '1'
local pacing = tonumber(ARGV[8]) or 0
local gate_quota = tonumber(ARGV[9]) or 0
local app_quota = tonumber(ARGV[10]) or 0
local day_ms = tonumber(ARGV[11]) or 86400000
local share = tonumber(ARGV[12]) or 0
if share > 0.9 then share = 0.9 end
if share < 0 then share = 0 end
local elapsed = (math.floor(now / 1000) + 8 * 3600 * 1000) % day_ms
local function turn(quota, used)
  local left = day_ms - elapsed
  local nxt = used + 1
  if pacing == 0 then
    local cap = math.floor(quota * (1 - share))
    if cap < 1 then cap = 1 end
    if used >= cap then return 2, left end
    return 0, 0
  end
  local on_line = (nxt - math.max(burst, 1)) * day_ms / quota
  local above = 0
  if share > 0 then
    above = (nxt - quota * (1 - share)) * day_ms / (quota * share)
  elseif nxt > quota then
    return 2, left
  end
  local due = math.max(on_line, above)
  if due <= elapsed then return 0, 0 end
  if due >= day_ms then return 2, left end
  return 1, due - elapsed
end
local counted_already = ARGV[14] == '1'
if bulk and not counted_already and (gate_quota > 0 or app_quota > 0) then
  local pace = nil
  local budgets = {}
  if gate_quota > 0 then
    local counted = tonumber(redis.call('GET', KEYS[5])) or 0
    local booked = tonumber(redis.call('GET', KEYS[6])) or 0
    budgets[#budgets + 1] = {gate_quota, math.max(counted, booked), 'the daily quota'}
  end
  if app_quota > 0 then
    budgets[#budgets + 1] = {app_quota, tonumber(redis.call('GET', KEYS[7])) or 0, "the app's daily quota"}
  end
  for _, bgt in ipairs(budgets) do
    local t, ms = turn(bgt[1], bgt[2])
    if t == 2 then
      local why = 'bulk work has used its share of ' .. bgt[3]
      return {3, math.floor(ms * 1000), why, '0', '0'}
    end
    if t == 1 and ms * 1000 > max_wait then
      -- Further ahead of the line than the caller may wait: come back when it is there.
      return {2, math.ceil(ms * 1000), '', tostring(rate), '0'}
    end
    if t == 1 then
      local r = bgt[1] * 1000 / day_ms
      if pace == nil or r < pace then pace = r end
    end
  end
  if pace and pace < rate then
    -- Ahead of the line: this budget's pace, a burst of one (the lead is used up).
    rate = pace
    burst = 1
    iv = 1000000 / rate
  end
end

local b = redis.call('HMGET', KEYS[1], 'tat', 'iv')
local tat = tonumber(b[1]) or now
local old_iv = tonumber(b[2]) or iv
if tat <= now then
  tat = now
elseif iv > old_iv then
  -- Rate cut: keep the debt in calls, not in time, so a cut gives no extra burst.
  tat = now + (tat - now) * iv / old_iv
end
-- How far ahead of its pace a shop may book: a fifth of a second, or one turn if longer.
-- One turn alone left the gate idle between a shop's turns at high rates (6% at 400/s with
-- 20 shops): its callers come back on time only to a few milliseconds.
local SHARE_LEAD_US = 200000
-- How long after its last call's turn a shop still counts as booking: its next turn and this
-- margin (a paced shop that still books is back by its next turn). A shop whose task gave its
-- slot back or finished keeps its part of the rate idle as long as it counts: for a second
-- (or two turns), that was 6% of the gate at 400/s with 20 shops taking turns, and 2-3% at
-- 10/s with 20 shops finishing their jobs.
local ACTIVE_FLOOR_US = 250000
local share_at = tonumber(ARGV[17]) or 0
local shop = ARGV[15] or ''
local shares, weights
local shop_weight = math.floor(tonumber(ARGV[16]) or 1)
if shop_weight < 1 then shop_weight = 1 end
local present = false
local total = shop_weight
local turn_key = 't:' .. shop
if share_at > 0 and shop ~= '' then
  shares, weights = KEYS[share_at], KEYS[share_at + 1]
  -- Shops that booked nothing lately share nothing any more.
  local gone = redis.call('ZRANGEBYSCORE', shares, '-inf', now)
  for _, s in ipairs(gone) do
    local w = tonumber(redis.call('HGET', weights, s)) or 0
    redis.call('HINCRBY', weights, '_sum', -w)
    redis.call('HDEL', weights, s, 't:' .. s)
    redis.call('ZREM', shares, s)
  end
  present = redis.call('ZSCORE', shares, shop) ~= false
  total = math.max(0, tonumber(redis.call('HGET', weights, '_sum')) or 0)
  if not present then total = total + shop_weight end
  -- Only while other shops book too, and the gate has calls booked ahead (when it has
  -- none, what the others leave is anyone's); a late waker booking again was let in.
  if total > shop_weight and tat > now and not counted_already then
    -- The shop's own pace: its weighted part of the rate. One call of it may be booked
    -- ahead of that pace; a call further ahead waits for its turn.
    local spacing = iv * total / shop_weight
    local lead = math.max(spacing, SHARE_LEAD_US)
    local turn = tonumber(redis.call('HGET', weights, turn_key)) or 0
    if turn > now + lead then
      return {4, math.max(1000, math.ceil(turn - now - lead)), '', tostring(rate), '0'}
    end
  end
end

-- A rate rise keeps the debt in time: reservations already booked at the old rate stay
-- where they are and new ones queue behind them, instead of landing on top of them.
local new_tat = tat + iv
local allow_at = new_tat - burst * iv
local send = allow_at
if send < now then send = now end
-- At most a second's worth of calls (the burst if larger; no more than the measured ceiling)
-- leave in one clock second of the server, none in the last `band`
-- ms of one: a call due there is booked at the next second's start (throttle::second_guard).
local budget = math.floor(math.max(rate, burst))
-- Never more than a measured limit the rate runs under (throttle::second_guard::budget_for).
if ceiling and ceiling >= rate and math.floor(ceiling) < budget then budget = math.floor(ceiling) end
if budget < 1 then budget = 1 end
local band = (tonumber(ARGV[5]) or 0) * 1000
if band > 999000 then band = 999000 end
local sec = math.floor(send / 1000000)
if band > 0 and send - sec * 1000000 >= 1000000 - band then
  sec = sec + 1
  send = sec * 1000000
end
local g = redis.call('HMGET', KEYS[1], 'sec', 'sent')
local gsec = tonumber(g[1]) or -1
local gsent = tonumber(g[2]) or 0
local pushed = false
if sec < gsec then
  -- Behind a later booking (a rate rise): it counts in the second already being filled.
  sec = gsec
  if send < sec * 1000000 then send = sec * 1000000 end
  pushed = true
end
if sec ~= gsec then
  gsent = 0
elseif gsent >= budget then
  sec = sec + 1
  send = sec * 1000000
  gsent = 0
  pushed = true
end
-- A call pushed out of its second (a spent budget, a later booking) leaves at `send`: the
-- bucket runs on from there, as if it had asked then. Otherwise the calls pushed out of one
-- second would all leave together at the next one's start, on top of that second's own, and
-- the pile would grow by one every time the bucket's phase put one call too many into a
-- second: a sliding window counts such a pile. A call held only by the band does not move
-- the bucket: it takes the place of the next second's own band calls, which are held in
-- turn, so each second still sends its budget and the band costs no rate; moving the bucket
-- for it lost up to the band's share of every second at a burst of one (docs/design.md,
-- "Gates").
if pushed and send > allow_at and send + iv > new_tat then new_tat = send + iv end
local wait = send - now
if wait > max_wait then
  return {2, math.ceil(wait), '', tostring(rate), '0'}
end
redis.call('HSET', KEYS[1], 'tat', fmt(new_tat), 'iv', tostring(iv), 'sec', fmt(sec), 'sent', fmt(gsent + 1))
-- Count the booking today; a day's counter gets its expiry once, when it is created.
local ttl = tonumber(ARGV[13]) or 0
local function book(key)
  if redis.call('INCR', key) == 1 and ttl > 0 then redis.call('EXPIRE', key, ttl) end
end
if not counted_already then
  if gate_quota > 0 and KEYS[6] then book(KEYS[6]) end
  if app_quota > 0 and KEYS[7] then book(KEYS[7]) end
end
-- An idle bucket is full anyway: let the key go once its debt is paid, plus a margin.
redis.call('PEXPIRE', KEYS[1], math.ceil((new_tat - now) / 1000) + 60000)
if shares then
  -- The shop's next call keeps its pace: its part of the rate from this one's send time.
  local spacing = iv * total / shop_weight
  local turn = tonumber(redis.call('HGET', weights, turn_key)) or 0
  if turn < send then turn = send end
  redis.call('HSET', weights, turn_key, fmt(turn + spacing))
  -- The shop shares the gate while it books: until its next turn and a quarter of a second
  -- after this call leaves.
  local active = send + spacing + ACTIVE_FLOOR_US
  local last = tonumber(redis.call('ZSCORE', shares, shop)) or 0
  if active > last then redis.call('ZADD', shares, active, shop) end
  if not present then
    redis.call('HSET', weights, shop, shop_weight)
    redis.call('HINCRBY', weights, '_sum', shop_weight)
  end
  local keep = math.ceil((active - now) / 1000) + 60000
  if redis.call('PTTL', shares) < keep then
    redis.call('PEXPIRE', shares, keep)
    redis.call('PEXPIRE', weights, keep)
  end
end
if wait == 0 then
  return {0, 0, '', tostring(rate), fmt(sec)}
end
return {1, math.ceil(wait), '', tostring(rate), fmt(sec)}
