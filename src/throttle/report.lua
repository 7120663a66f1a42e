-- Outcomes of one gate, batched: daily quota count, AIMD (same rules as throttle::aimd), pause.
-- KEYS: 1 aimd (hash: rate, ceiling, last_hit, succ), 2 pause (hash: until, reason),
--       3 conf (hash: rate, burst), 4 quota counter of the day (GMT+8), 5 bucket (hash: tat, iv).
-- ARGV: 1 successes, 2 calls (for the quota), 3 rate-limit hit (0/1), 4 pause ms (0 = none),
--       5 pause reason, 6 configured rate, 7 step, 8 successes per step,
--       9 ceiling window us, 10 ceiling factor, 11 hit cooldown us, 12 quota key ttl s,
--       13 optional "now" in us (tests only; empty = TIME), 14 configured burst,
--       15 the reporting process's measured p95 latency in ms ('' = not yet known),
--       16 pause channel ('' = none), 17 gate id "platform:api" for the pause message,
--       18 decrease margin, 19 ceiling hold us, 20 fewest successes that measure a limit.
-- The aimd hash also keeps the successes of the last second in fields w0..w10 ("slot:count",
-- slot = 100 ms; the ten slots up to now and the part of the one before them still inside the
-- last 1,000 ms): a rate-limit answer measures the platform's limit from them
-- (throttle::aimd, "Limit discovery" in docs/design.md).
-- Returns {calls today, rate, ceiling or '', hit effect (0 none/absorbed, 1 halved, 2 + ceiling)}.
if redis.replicate_commands then pcall(redis.replicate_commands) end
local now
if ARGV[13] and ARGV[13] ~= '' then
  now = tonumber(ARGV[13])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(x) return string.format('%.0f', x) end

local succ_n = tonumber(ARGV[1])
local calls = tonumber(ARGV[2])
local hit = tonumber(ARGV[3])
local pause_ms = tonumber(ARGV[4])
local base = tonumber(redis.call('HGET', KEYS[3], 'rate')) or tonumber(ARGV[6])
local step = tonumber(ARGV[7])
local per_step = tonumber(ARGV[8])
local min_rate = math.min(math.max(base * 0.02, 0.1), base) -- throttle::aimd::min_rate_for
local window = tonumber(ARGV[9])
local factor = tonumber(ARGV[10])
local cooldown = tonumber(ARGV[11])
local margin = tonumber(ARGV[18]) or 0.95
local hold = tonumber(ARGV[19]) or 30000000
local min_measured = tonumber(ARGV[20]) or 5
local slot = math.floor(now / 100000)

local used = 0
if calls > 0 then
  used = redis.call('INCRBY', KEYS[4], calls)
  redis.call('EXPIRE', KEYS[4], tonumber(ARGV[12]))
else
  used = tonumber(redis.call('GET', KEYS[4])) or 0
end

local st = redis.call('HMGET', KEYS[1], 'rate', 'ceiling', 'last_hit', 'succ')
local rate = tonumber(st[1]) or base
local ceiling = tonumber(st[2])
local last_hit = tonumber(st[3])
local succ = tonumber(st[4]) or 0
local in_cooldown = last_hit ~= nil and (now - last_hit) < cooldown
local effect = 0
local changed = false

-- Successes count towards the last second's measurement, in a hit's cooldown too.
if succ_n > 0 then
  local f = 'w' .. (slot % 11)
  local cell = redis.call('HGET', KEYS[1], f)
  local n = succ_n
  if cell then
    local s, c = string.match(cell, '^(%d+):(%d+)$')
    if tonumber(s) == slot then n = n + tonumber(c) end
  end
  redis.call('HSET', KEYS[1], f, slot .. ':' .. n)
end

if hit == 1 and not in_cooldown then
  local at = rate
  if at > base then at = base end
  if at < min_rate then at = min_rate end
  local second = last_hit ~= nil and (now - last_hit) <= window
  local measured = 0
  local cells = redis.call('HMGET', KEYS[1], 'w0', 'w1', 'w2', 'w3', 'w4', 'w5', 'w6', 'w7', 'w8', 'w9', 'w10')
  -- now is in us: the share of the oldest slot still inside the last 1,000 ms
  local oldest_share = 1 - (now - slot * 100000) / 100000
  for _, cell in ipairs(cells) do
    if cell then
      local s, c = string.match(cell, '^(%d+):(%d+)$')
      s = tonumber(s)
      if s and s <= slot and s + 10 > slot then
        measured = measured + tonumber(c)
      elseif s and s + 10 == slot then
        measured = measured + tonumber(c) * oldest_share
      end
    end
  end
  if measured >= min_measured then
    -- What the platform admitted in the last second is its limit; an isolated hit under a
    -- known ceiling does not lower it, repeated hits do.
    if ceiling == nil or measured > ceiling or second then ceiling = measured end
    local m = measured
    if m > at then m = at end
    rate = m * margin
    effect = 3
  else
    if second then
      ceiling = at
      effect = 2
    else
      effect = 1
    end
    rate = at / 2
  end
  if rate < min_rate then rate = min_rate end
  succ = 0
  last_hit = now
  changed = true
elseif hit ~= 1 and succ_n > 0 and not in_cooldown then
  local total = succ + succ_n
  local steps = math.floor(total / per_step)
  succ = total - steps * per_step
  local cap = base
  local holds = last_hit ~= nil and (now - last_hit) < hold
  if ceiling and holds and ceiling * factor < cap then cap = ceiling * factor end
  if steps > 0 and rate < cap then
    rate = rate + step * steps
    if rate > cap then rate = cap end
  end
  changed = true
end

if changed then
  redis.call('HSET', KEYS[1], 'rate', tostring(rate), 'succ', tostring(succ))
  if ceiling then redis.call('HSET', KEYS[1], 'ceiling', tostring(ceiling)) end
  if last_hit then redis.call('HSET', KEYS[1], 'last_hit', fmt(last_hit)) end
end

if pause_ms > 0 then
  local untl = now + pause_ms * 1000
  local cur = tonumber(redis.call('HGET', KEYS[2], 'until'))
  if cur == nil or cur < untl then
    redis.call('HSET', KEYS[2], 'until', fmt(untl), 'reason', ARGV[5])
    redis.call('PEXPIRE', KEYS[2], math.ceil(pause_ms) + 1000)
    -- Tell every worker now, so reservations already granted and sleeping do not fire into the
    -- ban (the workers check their local hold after the sleep).
    if ARGV[16] and ARGV[16] ~= '' then
      redis.call('PUBLISH', ARGV[16], ARGV[17] .. '|' .. fmt(pause_ms) .. '|' .. ARGV[5])
    end
    -- Resume with an empty bucket: a burst into a platform that just banned us would be
    -- refused again. Debt of `burst` calls at the current rate, due at the pause's end.
    local burst = tonumber(redis.call('HGET', KEYS[3], 'burst')) or tonumber(ARGV[14])
    local r = rate
    if r > base then r = base end
    if r < min_rate then r = min_rate end
    local iv = 1000000 / r
    local tat = tonumber(redis.call('HGET', KEYS[5], 'tat')) or 0
    local want = untl + burst * iv
    if tat < want then
      redis.call('HSET', KEYS[5], 'tat', fmt(want), 'iv', tostring(iv))
      redis.call('PEXPIRE', KEYS[5], math.ceil((want - now) / 1000) + 60000)
    end
  end
end

if ARGV[15] and ARGV[15] ~= '' then
  redis.call('HSET', KEYS[1], 'p95_ms', ARGV[15])
end

local c = ''
if ceiling then c = tostring(ceiling) end
return {used, tostring(rate), c, effect}
