-- Outcomes of one gate, batched: daily quota count, limit discovery (the rules of the reference
-- type throttle::aimd, on the Redis server's clock; docs/design.md, "Limit discovery"), pause.
-- KEYS: 1 aimd (hash: rate, ceiling, upper, confirmed, last_hit, prev_hit, m_sent, m_at,
--       m_probe, m_oth, m_dfrom, m_dn, d_from, d_n, last_change, succ, p95_ms, w0..w31), 2 pause (hash: until, reason),
--       3 conf (hash: rate, burst), 4 quota counter of the day (GMT+8), 5 bucket (hash: tat, iv),
--       6 the reporter's high-water mark (optional): the sequence number of the reporting
--         process's last batch applied; a batch sent again because its reply was lost (a
--         timeout, a broken connection) is applied once. A reporter sends its batches of a
--         gate in order, so one key per reporter suffices (it expires 10 minutes after the
--         reporter's last batch).
-- ARGV: 1 successes, 2 calls (for the quota), 3 send time of a rejected call in ms on the
--       server's clock ('' = no rejection), 4 pause ms (0 = none), 5 pause reason,
--       6 configured rate, 7 step, 8 successes per step,
--       9 successes by send slot "slot:count,..." (slot = ms / 100 on the server's clock),
--       10 ceiling factor, 11 hit cooldown ms, 12 quota key ttl s,
--       13 optional "now" in us (tests only; empty = TIME), 14 configured burst,
--       15 the reporting process's measured p95 latency in ms ('' = not yet known),
--       16 pause channel ('' = none), 17 gate id "platform:api" for the pause message,
--       18 decrease margin, 19 ceiling hold ms, 20 fewest successes that measure a limit,
--       21 settle ms, 22 probe every ms, 23 rejected calls in the batch (ARGV[3] is the
--       first's send time; '' = one if ARGV[3] is set), 24 the batch's sequence number
--       (with KEYS[6]).
-- Times in the aimd hash are ms; the pause and the bucket keep us (acquire.lua reads them).
-- Returns {calls today, rate, ceiling or '', effect (0 none, 1 measuring, 2 halved, 3 measured)}.
if redis.replicate_commands then pcall(redis.replicate_commands) end
local now
if ARGV[13] and ARGV[13] ~= '' then
  now = tonumber(ARGV[13])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local now_ms = math.floor(now / 1000)
if KEYS[6] then
  local seq = tonumber(ARGV[24])
  local last = tonumber(redis.call('GET', KEYS[6]))
  if seq ~= nil and last ~= nil and last >= seq then
    -- Applied already: answer with the state as it is.
    local applied = tonumber(redis.call('GET', KEYS[4])) or 0
    return {applied, redis.call('HGET', KEYS[1], 'rate') or ARGV[6], '', 0}
  end
  redis.call('SET', KEYS[6], ARGV[24] or '0', 'PX', 600000)
end
local function fmt(x) return string.format('%.0f', x) end

local SLOTS, SLOT_MS, EXACT_SHARE, PROBE_GAP, CLOSE_IN, LENT_SHARE = 32, 100, 0.02, 0.01, 0.95, 0.98
local DRAIN_FLOOR, JITTER_SHARE = 0.85, 0.02
local succ_n = tonumber(ARGV[1])
local calls = tonumber(ARGV[2])
local hit_sent = tonumber(ARGV[3])
local pause_ms = tonumber(ARGV[4])
local base = tonumber(redis.call('HGET', KEYS[3], 'rate')) or tonumber(ARGV[6])
local step = tonumber(ARGV[7])
local per_step = tonumber(ARGV[8])
local min_rate = math.min(math.max(base * 0.02, 0.1), base) -- throttle::aimd::min_rate_for
local factor = tonumber(ARGV[10])
local cooldown = tonumber(ARGV[11])
local margin = tonumber(ARGV[18])
local hold = tonumber(ARGV[19])
local min_measured = tonumber(ARGV[20])
local settle_ms = tonumber(ARGV[21])
local probe_every = tonumber(ARGV[22])
local hits = tonumber(ARGV[23]) or (hit_sent and 1 or 0)

local used = 0
if calls > 0 then
  used = redis.call('INCRBY', KEYS[4], calls)
  redis.call('EXPIRE', KEYS[4], tonumber(ARGV[12]))
else
  used = tonumber(redis.call('GET', KEYS[4])) or 0
end

local st = redis.call('HMGET', KEYS[1], 'rate', 'ceiling', 'upper', 'confirmed', 'last_hit',
  'm_sent', 'm_at', 'm_probe', 'last_change', 'succ', 'prev_hit', 'm_dfrom', 'd_from', 'd_n',
  'm_dn', 'm_oth')
local rate = tonumber(st[1]) or base
local ceiling = tonumber(st[2])
local upper = tonumber(st[3])
local confirmed = tonumber(st[4])
local last_hit = tonumber(st[5])
local m_sent = tonumber(st[6])
local m_at = tonumber(st[7])
local m_probe = st[8] == '1'
local last_change = tonumber(st[9]) or 0
local succ = tonumber(st[10]) or 0
local previous_hit = tonumber(st[11])
-- What the platform admitted since the last counted rejection left (AimdState::since_hit),
-- and over the span the open measurement's rejection ended (m_dfrom to m_sent: its late
-- answers still count until it settles).
local m_dfrom = tonumber(st[12])
local d_from = tonumber(st[13])
local d_n = tonumber(st[14]) or 0
local m_dn = tonumber(st[15]) or 0
-- Rejections absorbed while the measurement is open (Measuring::others).
local m_oth = tonumber(st[16]) or 0
local effect = 0

-- Successes by the slot their call left in (throttle::admitted).
if ARGV[9] ~= '' then
  for s, c in string.gmatch(ARGV[9], '(%d+):(%d+)') do
    local slot, n = tonumber(s), tonumber(c)
    local start = slot * SLOT_MS
    if m_sent ~= nil and m_dfrom ~= nil and start >= m_dfrom and start < m_sent then
      m_dn = m_dn + n
    elseif d_from ~= nil and start >= d_from then
      d_n = d_n + n
    end
    local f = 'w' .. fmt(slot % SLOTS)
    local cell = redis.call('HGET', KEYS[1], f)
    local cs, cc
    if cell then
      cs, cc = string.match(cell, '^(%d+):(%d+)$')
      cs, cc = tonumber(cs), tonumber(cc)
    end
    if cs == slot then
      redis.call('HSET', KEYS[1], f, fmt(slot) .. ':' .. fmt(cc + n))
    elseif cs == nil or cs < slot then
      redis.call('HSET', KEYS[1], f, fmt(slot) .. ':' .. fmt(n))
    end
  end
end

local cells = nil
local function between(from, to)
  if to <= from then return 0 end
  if cells == nil then
    local names = {}
    for i = 0, SLOTS - 1 do names[#names + 1] = 'w' .. i end
    cells = redis.call('HMGET', KEYS[1], unpack(names))
  end
  local sum = 0
  for i = 1, SLOTS do
    local cell = cells[i]
    if cell then
      local s, c = string.match(cell, '^(%d+):(%d+)$')
      local start = tonumber(s) * SLOT_MS
      local lo = math.max(start, from)
      local hi = math.min(start + SLOT_MS, to)
      local inside = 0
      if hi > lo then inside = hi - lo end
      sum = sum + tonumber(c) * inside / SLOT_MS
    end
  end
  return sum
end

-- AimdParams::under: ceiling_factor of the ceiling, at least one call a second under it.
local function under(c)
  local u = c * factor
  if c >= 2 and c - 1 < u then u = c - 1 end
  return u
end

local function holds()
  return last_hit ~= nil and (now_ms - last_hit) < hold
end
local function in_cooldown()
  return m_sent ~= nil or (last_hit ~= nil and (now_ms - last_hit) < cooldown)
end

-- Settle the open measurement once the answers are in (AimdState::settle).
if m_sent ~= nil and now_ms >= (last_hit or 0) + settle_ms then
  local sent = m_sent
  local second = math.floor(sent / 1000) * 1000
  local others = m_oth
  m_sent, m_oth = nil, 0
  -- Admitted per second from the counted rejection before this one to this one.
  local m_drain = nil
  if m_dfrom ~= nil and sent >= m_dfrom + 1000 then
    m_drain = m_dn * 1000 / (sent - m_dfrom)
  end
  m_dfrom, m_dn = nil, 0
  succ = 0
  last_change = now_ms
  local admitted = between(second, second + 1000)
  -- What the clean second before admitted, less a bucket's loan (AimdState::clean_second_before).
  local lower = admitted
  if previous_hit == nil or previous_hit < second - 1000 then
    lower = math.max(lower, between(math.max(second - 1000, 0), second) * CLOSE_IN)
  end
  if lower < min_measured then
    rate = math.max(m_at / 2, min_rate)
    confirmed = nil
    effect = 2
  else
    -- Calls of the second before still inside the rejected call's trailing second: a sliding
    -- window counted them, so the limit may be that much higher.
    local before = between(math.max(sent - 1000, 0), second)
    local c, u
    if m_probe and confirmed ~= nil then
      -- A rejected probe: back to the level that held, unless the rejected second admitted
      -- less than the probe sent (a window's count): then its reading (AimdState::settle).
      if lower >= m_at * LENT_SHARE then
        c = confirmed
      else
        c = math.max(lower, confirmed)
      end
      u = c
    elseif before <= math.max(admitted * EXACT_SHARE, 1) then
      c, u = lower, lower
    else
      c, u = lower, math.max(lower, admitted + before)
    end
    -- Rejected again while holding a ceiling, not probing: that ceiling was too high (a
    -- token bucket lets a rate above its refill run until it drained).
    if not m_probe and ceiling ~= nil and previous_hit ~= nil
        and (last_hit or 0) - previous_hit < hold then
      -- The same limit again under a rate that held under it: the gate's own jitter crossed
      -- it; one call a second more of margin, down to CLOSE_IN of it. Lower than it: the
      -- limit was read high (a drained token bucket reads its refill): a call of margin under
      -- the new reading. Either way the bracket closes.
      -- So too when it reads lower but the platform refused that call (and few beside it)
      -- and, since the last rejection, admitted what the gate sent: a window crossed by
      -- jitter.
      -- Few rejections while it was measured, against the calls admitted meanwhile
      -- (throttle::aimd::JITTER_SHARE).
      local lone = others <= math.max(between(sent, now_ms) * JITTER_SHARE, 2)
      local jitter = lone and m_drain ~= nil and m_drain >= m_at * LENT_SHARE
      local call_under_last = math.max(ceiling - 1, ceiling * CLOSE_IN)
      if jitter then
        c = call_under_last
      elseif c >= ceiling - 1 then
        c = math.min(call_under_last, c)
      else
        local reading = c
        c = math.max(c - 1, c * CLOSE_IN)
        -- Drained twice: capped so the gate runs at what was admitted between the two
        -- rejections, with no call of margin under it (AimdParams::over).
        if m_drain ~= nil then
          local run = math.max(m_drain, under(reading * DRAIN_FLOOR))
          local over = run / factor
          if run >= 1 and over < run + 1 then over = run + 1 end
          c = math.min(c, over)
        end
      end
      u = c
    end
    ceiling, upper, confirmed = c, u, nil
    rate = math.max(math.min(math.min(c, m_at) * margin, under(c)), min_rate)
    effect = 3
  end
end

if hit_sent ~= nil then
  if not in_cooldown() then
    local at = math.max(math.min(rate, base), math.min(min_rate, base))
    local second = math.floor(hit_sent / 1000) * 1000
    local so_far = between(second, hit_sent + 1)
    if last_hit == nil or last_hit < second - 1000 then
      so_far = math.max(so_far, between(math.max(second - 1000, 0), second) * CLOSE_IN)
    end
    rate = math.max(math.min(so_far, at) * margin, min_rate)
    m_sent, m_at, m_probe = hit_sent, at, confirmed ~= nil
    m_oth = math.max(hits - 1, 0)
    m_dfrom, m_dn = d_from, d_n
    d_from, d_n = hit_sent, 0
    succ = 0
    previous_hit = last_hit
    last_hit = now_ms
    effect = 1
  elseif m_sent ~= nil then
    m_oth = m_oth + hits
  end
elseif succ_n > 0 and not in_cooldown() then
  local total = succ + succ_n
  local steps = math.floor(total / per_step)
  succ = total - steps * per_step
  local cap = base
  if ceiling ~= nil and holds() and under(ceiling) < cap then cap = under(ceiling) end
  if steps > 0 and rate < cap then
    rate = math.min(rate + step * steps, cap)
  end
  -- Probe half-way up the bracket once the cap held for probe_every (AimdState::probe).
  -- A level holds once a whole clock second ran at it.
  local full_second = (math.floor(last_change / 1000) + 2) * 1000
  if ceiling ~= nil and upper ~= nil and now_ms - last_change >= probe_every
      and now_ms >= full_second and rate >= cap - 1e-9 then
    if upper <= ceiling * (1 + PROBE_GAP) or not holds() then
      confirmed = nil
    else
      local next = math.min(ceiling + math.max((upper - ceiling) / 2, ceiling * 0.02, 1), upper)
      confirmed = ceiling
      ceiling = next
      last_change = now_ms
      rate = math.min(base, under(next))
    end
  end
end

local function put(field, value)
  if value == nil then
    redis.call('HDEL', KEYS[1], field)
  else
    redis.call('HSET', KEYS[1], field, value)
  end
end
put('rate', tostring(rate))
put('succ', tostring(succ))
put('ceiling', ceiling and tostring(ceiling))
put('upper', upper and tostring(upper))
put('confirmed', confirmed and tostring(confirmed))
put('last_hit', last_hit and fmt(last_hit))
put('prev_hit', previous_hit and fmt(previous_hit))
put('m_sent', m_sent and fmt(m_sent))
put('m_at', m_sent and tostring(m_at))
put('m_probe', m_sent and (m_probe and '1' or '0'))
put('m_oth', m_sent and fmt(m_oth))
put('m_dfrom', m_sent and m_dfrom and fmt(m_dfrom))
put('m_dn', m_sent and m_dfrom and fmt(m_dn))
put('d_from', d_from and fmt(d_from))
put('d_n', fmt(d_n))
put('last_change', fmt(last_change))

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
    -- The burst follows the adaptive rate, as in acquire.lua (a debt of the configured burst
    -- at a rate cut tenfold held a gate several seconds past the ban).
    burst = math.max(burst * r / base, 1)
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
