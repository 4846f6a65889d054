#!lua
--[[ rate-set-v1: several admission decisions, all or nothing (ADR 0026, ADR 0027).
Spec: docs/programs.md "Policy sets".
KEYS[i]  member i's state key (every key in one Redis Cluster slot), i = 1..n
ARGV[1]  n, the member count, 1..8
then, per member in order: its algorithm code (1 fixed window, 2 sliding
  counter, 3 token bucket, 4 GCRA, 5 sliding log, 6 concurrency) followed by exactly the
  ARGV of that algorithm's decision program (its cost included).
Each member is decided by its algorithm's decision program, unchanged, at the
one server TIME read here; its writes are recorded, not sent. They are sent
only when every member answered ALLOWED: a set that one member denies or
refuses writes nothing.
Reply: 2 + 7n integers: status (1 every member ALLOWED, 2 otherwise), n, then
  each member's 7-integer decision reply as its program alone would give it.
  A malformed framing (n, an algorithm code, the ARGV count) is {5, 0}.
]]
local real, find = redis, string.find
local T = real.call('TIME')
local writes = {}
local proxy = {
  pcall = real.pcall,
  call = function(cmd, ...)
    if cmd == 'TIME' then return T end
    writes[#writes + 1] = {cmd, ...}
    return true
  end,
}
local function member_fixed_window(KEYS, ARGV, redis)
local M = 9007199254740991
local S = 35184372088832
local H = 9223372036854    -- floor((2^63-1) / 1e6): the longest time.Duration in ms
local SECMAX = 35184372088 -- floor(S / 1000)

local find = string.find
-- POS is int()'s pattern without its "0": a canonical integer >= 1.
local POS = '^[1-9][0-9]*$'
local sub, spack, sunpack = string.sub, struct.pack, struct.unpack

-- int parses a canonical non-negative decimal integer <= M (digits only, no
-- sign, no leading zero, at most 16 characters); nil otherwise, and for nil
-- (a missing field). Every caller passes a string (an ARGV, TIME or
-- dedup record element) or nil. Once the pattern has matched, s + 0 converts it exactly as
-- tonumber(s) would, with one strtod instead of two.
local function int(s)
  if s == '0' then return 0 end
  if s and #s <= 16 and find(s, '^[1-9][0-9]*$') then
    local n = s + 0
    if n <= M then return n end
  end
  return nil
end

local t = redis.call('TIME')
local now, future = 0, true
do
  -- int() inline, one function call less per field.
  local sec, usec = t[1], t[2]
  if (sec == '0' or find(sec, POS)) and (usec == '0' or find(usec, POS)) then
    sec, usec = sec + 0, usec + 0
  else
    sec = nil
  end
  if sec ~= nil and sec <= SECMAX and usec < 1000000 then
    now = sec * 1000 + math.floor(usec / 1000)
    future = now > S
  end
  if future then now = 0 end
end

if #KEYS ~= 1 or #ARGV ~= 6 then return {5, now, 0, 0, 0, 0, 0} end
-- The ARGV that must be >= 1 are checked as int() does, inline: the pattern
-- POS, then one conversion. A matching string longer than 16 characters is
-- at least 10^16 > M, and every one of them is bounded by M or less below,
-- so this accepts exactly what int() and the ranges accept.
local rev, cost, reg, grace, limit, win = ARGV[1], ARGV[2], int(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]
if find(rev, POS) and find(cost, POS) and find(grace, POS) and find(limit, POS) and find(win, POS) then
  rev, cost, grace, limit, win = rev + 0, cost + 0, grace + 0, limit + 0, win + 0
else
  rev = nil
end
if not (rev and rev <= M and reg and reg <= H and grace <= H
    and limit <= 4503599627370495
    and win <= H - grace
    and cost <= limit) then
  return {5, now, 0, 0, 0, 0, 0}
end
if future then return {3, 0, 0, 0, 0, 0, 0} end

-- One GET is the type check (WRONGTYPE: not a string) and the read. The
-- value is 20 bytes packed as '>BI6I6I7' (header 16*schema+algorithm,
-- l, w, c), then the policy revision exactly as ARGV[1]; the length check
-- comes first, so unpack never reads past the end. The fields are unsigned,
-- so only their ranges are checked; a field above 2^53 unpacks to an inexact
-- double that is still above every bound it is compared with.
local g = redis.pcall('GET', KEYS[1])
local fl, fw, fc -- fl is nil when there is no state
if g then
  if type(g) == 'table' then -- an error reply
    if g.err and find(g.err, '^WRONGTYPE') then return {4, now, 0, 0, 0, 0, 0} end
    return g
  end
  if #g ~= 20 + #ARGV[1] then return {4, now, 0, 0, 0, 0, 0} end
  local fh, n
  fh, fl, fw, fc, n = sunpack('>BI6I6I7', g)
  if not (fh == 33 and sub(g, n) == ARGV[1] and fl <= S
      and fw == math.floor(fl / win) and fc >= 1 and fc <= limit) then
    return {4, now, 0, 0, 0, 0, 0}
  end
end

local eff = now
if fl and now < fl then
  if fl - now > reg then return {3, now, fl, 0, 0, fl - now - reg, 0} end
  eff = fl
end

local k = math.floor(eff / win)
local used = 0
if fl and fw == k then used = fc end
local reset = (k + 1) * win
if used + cost > limit then
  return {2, now, eff, limit, limit - used, reset - eff, reset}
end
redis.call('SET', KEYS[1], spack('>BI6I6I7', 33, eff, k, used + cost) .. ARGV[1],
  'PX', reset - now + grace)
return {1, now, eff, limit, limit - used - cost, 0, reset}

end
local function member_sliding_counter(KEYS, ARGV, redis)
local M = 9007199254740991
local S = 35184372088832
local H = 9223372036854    -- floor((2^63-1) / 1e6): the longest time.Duration in ms
local Q = 1000000
local SECMAX = 35184372088 -- floor(S / 1000)
local QMAX = 9007199254    -- floor(M / Q)

local find = string.find
-- POS is int()'s pattern without its "0": a canonical integer >= 1.
local POS = '^[1-9][0-9]*$'
local sub, spack, sunpack = string.sub, struct.pack, struct.unpack

-- int parses a canonical non-negative decimal integer <= M (digits only, no
-- sign, no leading zero, at most 16 characters); nil otherwise, and for nil
-- (a missing field). Every caller passes a string (an ARGV, TIME or
-- dedup record element) or nil. Once the pattern has matched, s + 0 converts it exactly as
-- tonumber(s) would, with one strtod instead of two.
local function int(s)
  if s == '0' then return 0 end
  if s and #s <= 16 and find(s, '^[1-9][0-9]*$') then
    local n = s + 0
    if n <= M then return n end
  end
  return nil
end

-- ceil is integer ceiling division of 0 <= a <= M by b >= 1, from the quotient
-- and remainder (floor(a / b) of doubles is exact for a <= M).
local function ceil(a, b)
  local q = math.floor(a / b)
  if a - q * b > 0 then q = q + 1 end
  return q
end

local t = redis.call('TIME')
local now, future = 0, true
do
  -- int() inline, one function call less per field.
  local sec, usec = t[1], t[2]
  if (sec == '0' or find(sec, POS)) and (usec == '0' or find(usec, POS)) then
    sec, usec = sec + 0, usec + 0
  else
    sec = nil
  end
  if sec ~= nil and sec <= SECMAX and usec < 1000000 then
    now = sec * 1000 + math.floor(usec / 1000)
    future = now > S
  end
  if future then now = 0 end
end

if #KEYS ~= 1 or #ARGV ~= 6 then return {5, now, 0, 0, 0, 0, 0} end
-- The ARGV that must be >= 1 are checked as int() does, inline: the pattern
-- POS, then one conversion. A matching string longer than 16 characters is
-- at least 10^16 > M, and every one of them is bounded by M or less below,
-- so this accepts exactly what int() and the ranges accept.
local rev, cost, reg, grace, limit, win = ARGV[1], ARGV[2], int(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]
if find(rev, POS) and find(cost, POS) and find(grace, POS) and find(limit, POS) and find(win, POS) then
  rev, cost, grace, limit, win = rev + 0, cost + 0, grace + 0, limit + 0, win + 0
else
  rev = nil
end
if not (rev and rev <= M and reg and reg <= H and grace <= H
    and limit <= QMAX
    and win <= QMAX and win <= math.floor((H - grace) / 2)
    and cost <= limit) then
  return {5, now, 0, 0, 0, 0, 0}
end
if future then return {3, 0, 0, 0, 0, 0, 0} end

-- One GET is the type check (WRONGTYPE: not a string) and the read. The
-- value is 23 bytes packed as '>BI6I6I5I5' (header 16*schema+algorithm,
-- l, w, c, p), then the policy revision exactly as ARGV[1]; the length check
-- comes first, so unpack never reads past the end. The fields are unsigned,
-- so only their ranges are checked; a field above 2^53 unpacks to an inexact
-- double that is still above every bound it is compared with.
local g = redis.pcall('GET', KEYS[1])
local fl, fw, fc, fp -- fl is nil when there is no state
if g then
  if type(g) == 'table' then -- an error reply
    if g.err and find(g.err, '^WRONGTYPE') then return {4, now, 0, 0, 0, 0, 0} end
    return g
  end
  if #g ~= 23 + #ARGV[1] then return {4, now, 0, 0, 0, 0, 0} end
  local fh, n
  fh, fl, fw, fc, fp, n = sunpack('>BI6I6I5I5', g)
  if not (fh == 34 and sub(g, n) == ARGV[1] and fl <= S
      and fw == math.floor(fl / win) and fc >= 1 and fc <= limit and fp <= limit) then
    return {4, now, 0, 0, 0, 0, 0}
  end
end

local eff = now
if fl and now < fl then
  if fl - now > reg then return {3, now, fl, 0, 0, fl - now - reg, 0} end
  eff = fl
end

local k = math.floor(eff / win)
local e = eff - k * win
local prev, cur = 0, 0
if fl then
  if fw == k then
    prev, cur = fp, fc
  elseif fw == k - 1 then
    prev = fc
  end
end
-- S2: (win - e) * Q <= win * Q <= M; S1: prev * weight <= limit * Q <= M.
local weight = ceil((win - e) * Q, win)
local estimate = ceil(prev * weight, Q) + cur
if estimate + cost <= limit then
  local reset = (k + 2) * win
  redis.call('SET', KEYS[1], spack('>BI6I6I5I5', 34, eff, k, cur + cost, prev) .. ARGV[1],
    'PX', reset - now + grace)
  return {1, now, eff, limit, limit - estimate - cost, 0, reset}
end

-- earliest is the smallest elapsed time in a window whose previous window
-- holds p at which ceil(p * weight / Q) <= b. S1: b * Q <= limit * Q <= M;
-- S2: q <= Q, so q * win <= win * Q <= M.
local function earliest(b, p)
  local q = Q
  if p > 0 then
    q = math.floor(b * Q / p)
    if q > Q then q = Q end
  end
  return win - math.floor(q * win / Q)
end
local retry
if cur + cost <= limit then
  retry = earliest(limit - cur - cost, prev) - e
else
  retry = (win - e) + earliest(limit - cost, cur)
end
local remaining = limit - estimate
if remaining < 0 then remaining = 0 end
local reset = (k + 1) * win
if cur > 0 then reset = reset + win end
return {2, now, eff, limit, remaining, retry, reset}

end
local function member_token_bucket(KEYS, ARGV, redis)
local M = 9007199254740991
local S = 35184372088832
local H = 9223372036854    -- floor((2^63-1) / 1e6): the longest time.Duration in ms
local SECMAX = 35184372088 -- floor(S / 1000)
local LMAX = 64 -- the most live lease records of one subject (ADR 0042)

local find = string.find
-- POS is int()'s pattern without its "0": a canonical integer >= 1.
local POS = '^[1-9][0-9]*$'
local sub, spack, sunpack = string.sub, struct.pack, struct.unpack

-- int parses a canonical non-negative decimal integer <= M (digits only, no
-- sign, no leading zero, at most 16 characters); nil otherwise, and for nil
-- (a missing field). Every caller passes a string (an ARGV, TIME or
-- dedup record element) or nil. Once the pattern has matched, s + 0 converts it exactly as
-- tonumber(s) would, with one strtod instead of two.
local function int(s)
  if s == '0' then return 0 end
  if s and #s <= 16 and find(s, '^[1-9][0-9]*$') then
    local n = s + 0
    if n <= M then return n end
  end
  return nil
end

-- ceil is integer ceiling division of 0 <= a <= M by b >= 1, from the quotient
-- and remainder (floor(a / b) of doubles is exact for a <= M).
local function ceil(a, b)
  local q = math.floor(a / b)
  if a - q * b > 0 then q = q + 1 end
  return q
end

local t = redis.call('TIME')
local now, future = 0, true
do
  -- int() inline, one function call less per field.
  local sec, usec = t[1], t[2]
  if (sec == '0' or find(sec, POS)) and (usec == '0' or find(usec, POS)) then
    sec, usec = sec + 0, usec + 0
  else
    sec = nil
  end
  if sec ~= nil and sec <= SECMAX and usec < 1000000 then
    now = sec * 1000 + math.floor(usec / 1000)
    future = now > S
  end
  if future then now = 0 end
end

if #KEYS ~= 1 or #ARGV ~= 7 then return {5, now, 0, 0, 0, 0, 0} end
-- The ARGV that must be >= 1 are checked as int() does, inline: the pattern
-- POS, then one conversion. A matching string longer than 16 characters is
-- at least 10^16 > M, and every one of them is bounded by M or less below,
-- so this accepts exactly what int() and the ranges accept.
local rev, cost, reg, grace, cap, rate, per = ARGV[1], ARGV[2], int(ARGV[3]), ARGV[4], ARGV[5], ARGV[6], ARGV[7]
if find(rev, POS) and find(cost, POS) and find(grace, POS) and find(cap, POS) and find(rate, POS) and find(per, POS) then
  rev, cost, grace, cap, rate, per = rev + 0, cost + 0, grace + 0, cap + 0, rate + 0, per + 0
else
  rev = nil
end
if not (rev and rev <= M and reg and reg <= H and grace <= H
    and per <= H and rate <= M
    and cap <= math.floor(M / per)
    and ceil(cap * per, rate) <= H - grace
    and cost <= cap) then
  return {5, now, 0, 0, 0, 0, 0}
end
if future then return {3, 0, 0, 0, 0, 0, 0} end

-- One GET is the type check (WRONGTYPE: not a string) and the read. The
-- value is 20 bytes packed as '>BI6I7I6' (header 16*schema+algorithm,
-- l, t, m), with live leases the record count and the records, then the
-- policy revision exactly as ARGV[1]; the length checks come first, so
-- unpack never reads past the end. The fields are unsigned, so only their
-- ranges are checked; a field above 2^53 unpacks to an inexact double
-- that is still above every bound it is compared with.
local g = redis.pcall('GET', KEYS[1])
local fl, ft, fm -- fl is nil when there is no state
-- The lease records (ADR 0042): reserved at, end, units; ln of them.
local lt, le, lu, ln = nil, nil, nil, 0
if g then
  if type(g) == 'table' then -- an error reply
    if g.err and find(g.err, '^WRONGTYPE') then return {4, now, 0, 0, 0, 0, 0} end
    return g
  end
  if #g < 20 + #ARGV[1] then return {4, now, 0, 0, 0, 0, 0} end
  local fh, n
  fh, fl, ft, fm, n = sunpack('>BI6I7I6', g)
  if fh == 51 and #g > 20 + #ARGV[1] then
    ln, n = sunpack('>B', g, n)
    if not (ln >= 1 and ln <= LMAX and #g == 21 + 19 * ln + #ARGV[1]) then return {4, now, 0, 0, 0, 0, 0} end
    lt, le, lu = {}, {}, {}
    local sum = 0
    for i = 1, ln do
      lt[i], le[i], lu[i], n = sunpack('>I6I6I7', g, n)
      if not (lt[i] <= le[i] and le[i] <= S + H and lu[i] >= 1 and lu[i] <= cap) then return {4, now, 0, 0, 0, 0, 0} end
      sum = sum + lu[i]
    end
    if sum > cap then return {4, now, 0, 0, 0, 0, 0} end
  elseif not (fh == 35 and #g == 20 + #ARGV[1]) then
    return {4, now, 0, 0, 0, 0, 0}
  end
  if not (sub(g, n) == ARGV[1] and fl <= S
      and ft < cap and fm < per) then
    return {4, now, 0, 0, 0, 0, 0}
  end
end

local eff = now
if fl and now < fl then
  if fl - now > reg then return {3, now, fl, 0, 0, fl - now - reg, 0} end
  eff = fl
end

-- T1: every scaled quantity below is at most full = C*P <= M.
local full = cap * per
local s = full
if fl then
  s = ft * per + fm
  -- Compare the elapsed time with the time to fill before multiplying: when
  -- it is shorter, elapsed * R < full - s, so the sum stays below full.
  if eff - fl >= ceil(full - s, rate) then
    s = full
  else
    s = s + (eff - fl) * rate
  end
end
-- Leases (ADR 0042): while a record is live the level is at most full less
-- the live records' units. Since the last write the cap rose at each end
-- that passed (to full less the units of the records ending no earlier),
-- and the level refilled from there at the rate; top is the cap at eff.
-- The live records are kept, compacted, kn of them; lend is the last end.
local top, kn, lend = full, 0, 0
for i = 1, ln do
  if le[i] <= eff then
    local room = 0
    for j = 1, ln do
      if le[j] >= le[i] then room = room + lu[j] * per end
    end
    -- As above: d < ceil(room / R) bounds d * R below room.
    local d = eff - le[i]
    if d < ceil(room, rate) and full - room + d * rate < s then s = full - room + d * rate end
  end
end
for i = 1, ln do
  if le[i] > eff then
    top = top - lu[i] * per
    kn = kn + 1
    lt[kn], le[kn], lu[kn] = lt[i], le[i], lu[i]
    if le[i] > lend then lend = le[i] end
  end
end
if s > top then s = top end
-- put writes the level after (scaled) at eff with the live records, its
-- TTL past reset (resetOf: at least the last end, so no record is lost).
local function put(after, reset)
  local tokens = math.floor(after / per)
  local v
  if kn == 0 then
    v = spack('>BI6I7I6', 35, eff, tokens, after - tokens * per)
  else
    v = spack('>BI6I7I6B', 51, eff, tokens, after - tokens * per, kn)
    for i = 1, kn do v = v .. spack('>I6I6I7', lt[i], le[i], lu[i]) end
  end
  redis.call('SET', KEYS[1], v .. ARGV[1], 'PX', reset - now + grace)
end
-- resetOf is when the bucket is full again from the scaled level x: the
-- refill time, and no earlier than the last record's end.
local function resetOf(x)
  local r = eff + ceil(full - x, rate) -- T2
  if r < lend then r = lend end
  return r
end
local need = cost * per
if s >= need then
  local after = s - need
  local reset = resetOf(after)
  put(after, reset)
  return {1, now, eff, cap, math.floor(after / per), 0, reset}
end
return {2, now, eff, cap, math.floor(s / per), ceil(need - s, rate), resetOf(s)}

end
local function member_gcra(KEYS, ARGV, redis)
local M = 9007199254740991
local S = 35184372088832
local H = 9223372036854    -- floor((2^63-1) / 1e6): the longest time.Duration in ms
local SECMAX = 35184372088 -- floor(S / 1000)
local LMAX = 64 -- the most live lease records of one subject (ADR 0042)

local find = string.find
-- POS is int()'s pattern without its "0": a canonical integer >= 1.
local POS = '^[1-9][0-9]*$'
local sub, spack, sunpack = string.sub, struct.pack, struct.unpack

-- int parses a canonical non-negative decimal integer <= M (digits only, no
-- sign, no leading zero, at most 16 characters); nil otherwise, and for nil
-- (a missing field). Every caller passes a string (an ARGV, TIME or
-- dedup record element) or nil. Once the pattern has matched, s + 0 converts it exactly as
-- tonumber(s) would, with one strtod instead of two.
local function int(s)
  if s == '0' then return 0 end
  if s and #s <= 16 and find(s, '^[1-9][0-9]*$') then
    local n = s + 0
    if n <= M then return n end
  end
  return nil
end

-- ceil is integer ceiling division of 0 <= a <= M by b >= 1, from the quotient
-- and remainder (floor(a / b) of doubles is exact for a <= M).
local function ceil(a, b)
  local q = math.floor(a / b)
  if a - q * b > 0 then q = q + 1 end
  return q
end

local t = redis.call('TIME')
local now, future = 0, true
do
  -- int() inline, one function call less per field.
  local sec, usec = t[1], t[2]
  if (sec == '0' or find(sec, POS)) and (usec == '0' or find(usec, POS)) then
    sec, usec = sec + 0, usec + 0
  else
    sec = nil
  end
  if sec ~= nil and sec <= SECMAX and usec < 1000000 then
    now = sec * 1000 + math.floor(usec / 1000)
    future = now > S
  end
  if future then now = 0 end
end

if #KEYS ~= 1 or #ARGV ~= 7 then return {5, now, 0, 0, 0, 0, 0} end
-- The ARGV that must be >= 1 are checked as int() does, inline: the pattern
-- POS, then one conversion. A matching string longer than 16 characters is
-- at least 10^16 > M, and each is bounded by M or less below (P too: B >= 1
-- and B <= (M - 999*R)/P), so this accepts exactly what int() and the
-- ranges accept.
local rev, cost, reg, grace, burst, rate, per = ARGV[1], ARGV[2], int(ARGV[3]), ARGV[4], ARGV[5], ARGV[6], ARGV[7]
if find(rev, POS) and find(cost, POS) and find(grace, POS) and find(burst, POS) and find(rate, POS) and find(per, POS) then
  rev, cost, grace, burst, rate, per = rev + 0, cost + 0, grace + 0, burst + 0, rate + 0, per + 0
else
  rev = nil
end
if not (rev and rev <= M and reg and reg <= H and grace <= H
    and rate <= math.floor(M / 999)
    and burst <= math.floor((M - 999 * rate) / per)
    and ceil(ceil(burst * per, rate), 1000) + 1 <= H - grace
    and cost <= burst) then
  return {5, now, 0, 0, 0, 0, 0}
end
if future then return {3, 0, 0, 0, 0, 0, 0} end

-- One GET is the type check (WRONGTYPE: not a string) and the read. The
-- value is 7 + w bytes packed as '>BI6Iw' (header 16*schema+algorithm,
-- 2^46*(7-w) + l, d in w = 4..7 bytes), then the policy revision exactly as
-- ARGV[1]: the length gives w, checked first, so unpack never reads past
-- the end, and l's field must carry the same w. The fields are unsigned, so
-- only their ranges are checked (the 6-byte field is below 2^48, exact).
local g = redis.pcall('GET', KEYS[1])
local fl, fd -- fl is nil when there is no state
-- The lease records (ADR 0042): reserved at, end, units; ln of them.
local lt, le, lu, ln = nil, nil, nil, 0
if g then
  if type(g) == 'table' then -- an error reply
    if g.err and find(g.err, '^WRONGTYPE') then return {4, now, 0, 0, 0, 0, 0} end
    return g
  end
  local w, f = #g - 7 - #ARGV[1], '>BI6I7'
  local fh, n
  if #g > 7 + #ARGV[1] and sunpack('>B', g) == 52 then
    -- With records l's field gives w, then d, the count and the records.
    fh, fl, n = sunpack('>BI6', g)
    w = 7 - math.floor(fl / 70368744177664)
    if #g < 27 + w + #ARGV[1] then return {4, now, 0, 0, 0, 0, 0} end
    fd, ln, n = sunpack('>I' .. w .. 'B', g, n)
    if not (ln >= 1 and ln <= LMAX and #g == 8 + w + 19 * ln + #ARGV[1]) then return {4, now, 0, 0, 0, 0, 0} end
    lt, le, lu = {}, {}, {}
    local sum = 0
    for i = 1, ln do
      lt[i], le[i], lu[i], n = sunpack('>I6I6I7', g, n)
      if not (lt[i] <= le[i] and le[i] <= S + H and lu[i] >= 1 and lu[i] <= burst) then return {4, now, 0, 0, 0, 0, 0} end
      sum = sum + lu[i]
    end
    if sum > burst then return {4, now, 0, 0, 0, 0, 0} end
    fh = 36
  else
    if w == 4 then f = '>BI6I4' elseif w == 5 then f = '>BI6I5' elseif w == 6 then f = '>BI6I6'
    elseif w ~= 7 then return {4, now, 0, 0, 0, 0, 0} end
    fh, fl, fd, n = sunpack(f, g)
  end
  fl = fl - (7 - w) * 70368744177664 -- 2^46*(7-w): l's field carries w
  if not (fh == 36 and sub(g, n) == ARGV[1] and fl >= 0 and fl <= S
      and fd <= burst * per + 999 * rate) then
    return {4, now, 0, 0, 0, 0, 0}
  end
end

local eff = now
if fl and now < fl then
  if fl - now > reg then return {3, now, fl, 0, 0, fl - now - reg, 0} end
  eff = fl
end

-- The effective instant in microseconds is eff*1000 + frac; absolute
-- microsecond instants are never formed (S*1000 > M), only offsets from
-- eff*1000 and from l*1000.
local frac = 0
if eff == now then
  local us = int(t[2])
  frac = us - math.floor(us / 1000) * 1000
end
-- G1: bp and every scaled quantity below are at most B*P + 999*R <= M.
local bp = burst * per
-- D = (TAT - effective instant) * R when TAT is later, else 0 (TAT in the
-- past: the state is empty). Compare the elapsed time with TAT before
-- multiplying: delta * R is formed only when it is below d.
local D = 0
if fl then
  local k = ceil(fd, rate) -- us from l*1000 to TAT
  local e = eff - fl -- whole ms since l, >= 0
  if e < ceil(k, 1000) then
    local delta = e * 1000 + frac
    if delta < k then D = fd - delta * rate end
  end
end
-- Leases (ADR 0042): while a record is live, TAT is at least the
-- effective instant plus its units of emission intervals. Since the last
-- write that floor fell at each end that passed (to the units of the
-- records ending no earlier) and TAT came nearer from there at one
-- microsecond per microsecond; then the live records' floor (live their
-- units). The live records are kept, compacted, kn of them; lend is the
-- last end. Dropping a record later leaves D as it is: the level goes on
-- from where the floor held it, it does not jump.
local live, kn, lend = 0, 0, 0
for i = 1, ln do
  if le[i] <= eff then
    local room = 0
    for j = 1, ln do
      if le[j] >= le[i] then room = room + lu[j] * per end
    end
    -- As in the TAT above: elapsed * R is formed only below room.
    local elapsed = (eff - le[i]) * 1000 + frac
    if elapsed < ceil(room, rate) and room - elapsed * rate > D then D = room - elapsed * rate end
  end
end
for i = 1, ln do
  if le[i] > eff then
    kn = kn + 1
    lt[kn], le[kn], lu[kn] = lt[i], le[i], lu[i]
    live = live + lu[i]
    if le[i] > lend then lend = le[i] end
  end
end
if D < live * per then D = live * per end
local need = cost * per
if D <= bp - need then
  -- Admit: TAT becomes max(TAT, now) + cost*P/R, at most now + B*P/R.
  local after = D + need
  local reset = eff + ceil(ceil(frac * rate + after, rate), 1000) -- G2
  -- The new state: l = eff, d = after + frac*R in the fewest
  -- of 4..7 bytes that hold it, l's field carrying 2^46*(7-w) (ADR 0029).
  local nv, nd = nil, after + frac * rate
  if nd < 4294967296 then nv = spack('>BI6I4', 36, 211106232532992 + eff, nd)
  elseif nd < 1099511627776 then nv = spack('>BI6I5', 36, 140737488355328 + eff, nd)
  elseif nd < 281474976710656 then nv = spack('>BI6I6', 36, 70368744177664 + eff, nd)
  else nv = spack('>BI6I7', 36, eff, nd) end
  if kn > 0 then
    -- The live lease records (ADR 0042), and a TTL past the last end.
    nv = string.char(52) .. sub(nv, 2) .. spack('>B', kn)
    for i = 1, kn do nv = nv .. spack('>I6I6I7', lt[i], le[i], lu[i]) end
    if reset < lend then reset = lend end
  end
  redis.call('SET', KEYS[1], nv .. ARGV[1], 'PX', reset - now + grace)
  return {1, now, eff, burst, math.floor((bp - after) / per), 0, reset}
end
local left = 0
if D < bp then left = math.floor((bp - D) / per) end
-- Admitted once TAT - (B - cost)*P/R is reached: D - (bp - need) > 0 is
-- left of it, in 1/R us, after frac us of this millisecond.
return {2, now, eff, burst, left, ceil(frac + ceil(D - (bp - need), rate), 1000), eff + ceil(ceil(frac * rate + D, rate), 1000)}

end
local function member_sliding_log(KEYS, ARGV, redis)
local M = 9007199254740991
local S = 35184372088832
local H = 9223372036854    -- floor((2^63-1) / 1e6): the longest time.Duration in ms
local SECMAX = 35184372088 -- floor(S / 1000)

local find = string.find
-- POS is int()'s pattern without its "0": a canonical integer >= 1.
local POS = '^[1-9][0-9]*$'
local sub, spack, sunpack = string.sub, struct.pack, struct.unpack

-- int parses a canonical non-negative decimal integer <= M (digits only, no
-- sign, no leading zero, at most 16 characters); nil otherwise, and for nil
-- (a missing field). Every caller passes a string (an ARGV, TIME or
-- dedup record element) or nil. Once the pattern has matched, s + 0 converts it exactly as
-- tonumber(s) would, with one strtod instead of two.
local function int(s)
  if s == '0' then return 0 end
  if s and #s <= 16 and find(s, '^[1-9][0-9]*$') then
    local n = s + 0
    if n <= M then return n end
  end
  return nil
end

local t = redis.call('TIME')
local now, future = 0, true
do
  -- int() inline, one function call less per field.
  local sec, usec = t[1], t[2]
  if (sec == '0' or find(sec, POS)) and (usec == '0' or find(usec, POS)) then
    sec, usec = sec + 0, usec + 0
  else
    sec = nil
  end
  if sec ~= nil and sec <= SECMAX and usec < 1000000 then
    now = sec * 1000 + math.floor(usec / 1000)
    future = now > S
  end
  if future then now = 0 end
end

if #KEYS ~= 1 or #ARGV ~= 6 then return {5, now, 0, 0, 0, 0, 0} end
-- The ARGV that must be >= 1 are checked as int() does, inline: the pattern
-- POS, then one conversion. A matching string longer than 16 characters is
-- at least 10^16 > M, and every one of them is bounded by M or less below,
-- so this accepts exactly what int() and the ranges accept.
local rev, cost, reg, grace, limit, win = ARGV[1], ARGV[2], int(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]
if find(rev, POS) and find(cost, POS) and find(grace, POS) and find(limit, POS) and find(win, POS) then
  rev, cost, grace, limit, win = rev + 0, cost + 0, grace + 0, limit + 0, win + 0
else
  rev = nil
end
if not (rev and rev <= M and reg and reg <= H and grace <= H
    and limit <= 10000
    and win <= H - grace
    and cost <= limit) then
  return {5, now, 0, 0, 0, 0, 0}
end
if future then return {3, 0, 0, 0, 0, 0, 0} end

-- One GET is the type check (WRONGTYPE: not a string) and the read. The
-- value is an 11-byte header '>BI6I2I2' (16*schema+algorithm, l, s, n),
-- n entries of 8 bytes '>I6I2' (t, c), then the policy revision exactly as
-- ARGV[1]; the length checks come first, so unpack never reads past the
-- end. The fields are unsigned, so only their ranges are checked.
local g = redis.pcall('GET', KEYS[1])
local fl, fs, fn, newest -- fl is nil when there is no state
if g then
  if type(g) == 'table' then -- an error reply
    if g.err and find(g.err, '^WRONGTYPE') then return {4, now, 0, 0, 0, 0, 0} end
    return g
  end
  if #g < 19 + #ARGV[1] then return {4, now, 0, 0, 0, 0, 0} end
  local fh
  fh, fl, fs, fn = sunpack('>BI6I2I2', g)
  if not (fh == 37 and fn >= 1 and #g == 11 + 8 * fn + #ARGV[1]
      and sub(g, 12 + 8 * fn) == ARGV[1] and fl <= S and fn <= fs and fs <= limit) then
    return {4, now, 0, 0, 0, 0, 0}
  end
  -- Entry i (1-based) starts at byte 4 + 8*i; the newest is entry n. A
  -- lease's entry (ADR 0042) is at its end, up to a window after l.
  newest = sunpack('>I6', g, 4 + 8 * fn)
  if newest > fl + win then return {4, now, 0, 0, 0, 0, 0} end
end

local eff = now
if fl and now < fl then
  if fl - now > reg then return {3, now, fl, 0, 0, fl - now - reg, 0} end
  eff = fl
end

-- Prune: an entry at or before eff - window has left the window. first is
-- the oldest kept entry, sum the kept costs (the stored sum less the
-- dropped ones: never recomputed).
local first, sum = 1, 0
if fl then
  first, sum = fn + 1, 0
  if newest > eff - win then
    -- The newest entry is kept, so the loop ends at it at the latest.
    first, sum = 1, fs
    local at, c = sunpack('>I6I2', g, 12)
    while at <= eff - win do
      sum = sum - c
      first = first + 1
      at, c = sunpack('>I6I2', g, 4 + 8 * first)
    end
    if sum < fn - first + 1 then return {4, now, 0, 0, 0, 0, 0} end
  end
end
-- kept is the kept entries as bytes ('' when none).
local kept = ''
if fl then kept = sub(g, 4 + 8 * first, 11 + 8 * fn) end
-- place returns the entries k with (t, c) after every entry at or before
-- t: the log stays in instant order with a lease's entry in the future
-- (ADR 0042); without one it appends.
local function place(k, t, c)
  local i = #k / 8
  while i >= 1 and sunpack('>I6', k, 8 * i - 7) > t do i = i - 1 end
  return sub(k, 1, 8 * i) .. spack('>I6I2', t, c) .. sub(k, 8 * i + 1)
end
-- resetOf is when the entries k have all left the window: the newest's
-- instant plus the window (eff when none).
local function resetOf(k)
  if #k == 0 then return eff end
  return sunpack('>I6', k, #k - 7) + win
end
if sum + cost > limit then
  -- Admitted once enough of the oldest kept entries have left: the first
  -- entry at which their costs reach sum + cost - limit leaves at t + window.
  local need, freed, i, at, c = sum + cost - limit, 0, first - 1, 0, 0
  repeat
    i = i + 1
    if i > fn then return {4, now, 0, 0, 0, 0, 0} end
    at, c = sunpack('>I6I2', g, 4 + 8 * i)
    freed = freed + c
  until freed >= need
  return {2, now, eff, limit, limit - sum, at + win - eff, newest + win}
end
kept = place(kept, eff, cost)
local reset = resetOf(kept)
redis.call('SET', KEYS[1], spack('>BI6I2I2', 37, eff, sum + cost, #kept / 8) .. kept .. ARGV[1],
  'PX', reset - now + grace)
return {1, now, eff, limit, limit - sum - cost, 0, reset}

end
local function member_concurrency(KEYS, ARGV, redis)
local M = 9007199254740991
local S = 35184372088832
local H = 9223372036854    -- floor((2^63-1) / 1e6): the longest time.Duration in ms
local SECMAX = 35184372088 -- floor(S / 1000)

local find = string.find
-- POS is int()'s pattern without its "0": a canonical integer >= 1.
local POS = '^[1-9][0-9]*$'
local sub, spack, sunpack = string.sub, struct.pack, struct.unpack

-- int parses a canonical non-negative decimal integer <= M (digits only, no
-- sign, no leading zero, at most 16 characters); nil otherwise, and for nil
-- (a missing field). Every caller passes a string (an ARGV, TIME or
-- dedup record element) or nil. Once the pattern has matched, s + 0 converts it exactly as
-- tonumber(s) would, with one strtod instead of two.
local function int(s)
  if s == '0' then return 0 end
  if s and #s <= 16 and find(s, '^[1-9][0-9]*$') then
    local n = s + 0
    if n <= M then return n end
  end
  return nil
end

local t = redis.call('TIME')
local now, future = 0, true
do
  -- int() inline, one function call less per field.
  local sec, usec = t[1], t[2]
  if (sec == '0' or find(sec, POS)) and (usec == '0' or find(usec, POS)) then
    sec, usec = sec + 0, usec + 0
  else
    sec = nil
  end
  if sec ~= nil and sec <= SECMAX and usec < 1000000 then
    now = sec * 1000 + math.floor(usec / 1000)
    future = now > S
  end
  if future then now = 0 end
end

if #KEYS ~= 1 or #ARGV ~= 6 then return {5, now, 0, 0, 0, 0, 0} end
-- The ARGV that must be >= 1 are checked as int() does, inline: the pattern
-- POS, then one conversion. A matching string longer than 16 characters is
-- at least 10^16 > M, and every one of them is bounded by M or less below,
-- so this accepts exactly what int() and the ranges accept.
local rev, cost, reg, grace, limit, win = ARGV[1], ARGV[2], int(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]
if find(rev, POS) and find(cost, POS) and find(grace, POS) and find(limit, POS) and find(win, POS) then
  rev, cost, grace, limit, win = rev + 0, cost + 0, grace + 0, limit + 0, win + 0
else
  rev = nil
end
if not (rev and rev <= M and reg and reg <= H and grace <= H
    and limit <= 10000
    and win <= H - grace
    and cost <= limit) then
  return {5, now, 0, 0, 0, 0, 0}
end
if future then return {3, 0, 0, 0, 0, 0, 0} end

-- One GET is the type check (WRONGTYPE: not a string) and the read. The
-- value is an 11-byte header '>BI6I2I2' (16*schema+algorithm, l, s, n),
-- n entries of 8 bytes '>I6I2' (t, c), then the policy revision exactly as
-- ARGV[1]; the length checks come first, so unpack never reads past the
-- end. The fields are unsigned, so only their ranges are checked.
local g = redis.pcall('GET', KEYS[1])
local fl, fs, fn, newest -- fl is nil when there is no state
if g then
  if type(g) == 'table' then -- an error reply
    if g.err and find(g.err, '^WRONGTYPE') then return {4, now, 0, 0, 0, 0, 0} end
    return g
  end
  if #g < 19 + #ARGV[1] then return {4, now, 0, 0, 0, 0, 0} end
  local fh
  fh, fl, fs, fn = sunpack('>BI6I2I2', g)
  if not (fh == 39 and fn >= 1 and #g == 11 + 8 * fn + #ARGV[1]
      and sub(g, 12 + 8 * fn) == ARGV[1] and fl <= S and fn <= fs and fs <= limit) then
    return {4, now, 0, 0, 0, 0, 0}
  end
  -- Entry i (1-based) starts at byte 4 + 8*i; the newest is entry n. A
  -- lease's entry (ADR 0042) is at its end, up to a window after l.
  newest = sunpack('>I6', g, 4 + 8 * fn)
  if newest > fl + win then return {4, now, 0, 0, 0, 0, 0} end
end

local eff = now
if fl and now < fl then
  if fl - now > reg then return {3, now, fl, 0, 0, fl - now - reg, 0} end
  eff = fl
end

-- Prune: an entry at or before eff - window has left the window. first is
-- the oldest kept entry, sum the kept costs (the stored sum less the
-- dropped ones: never recomputed).
local first, sum = 1, 0
if fl then
  first, sum = fn + 1, 0
  if newest > eff - win then
    -- The newest entry is kept, so the loop ends at it at the latest.
    first, sum = 1, fs
    local at, c = sunpack('>I6I2', g, 12)
    while at <= eff - win do
      sum = sum - c
      first = first + 1
      at, c = sunpack('>I6I2', g, 4 + 8 * first)
    end
    if sum < fn - first + 1 then return {4, now, 0, 0, 0, 0, 0} end
  end
end
-- kept is the kept entries as bytes ('' when none).
local kept = ''
if fl then kept = sub(g, 4 + 8 * first, 11 + 8 * fn) end
-- place returns the entries k with (t, c) after every entry at or before
-- t: the log stays in instant order with a lease's entry in the future
-- (ADR 0042); without one it appends.
local function place(k, t, c)
  local i = #k / 8
  while i >= 1 and sunpack('>I6', k, 8 * i - 7) > t do i = i - 1 end
  return sub(k, 1, 8 * i) .. spack('>I6I2', t, c) .. sub(k, 8 * i + 1)
end
-- resetOf is when the entries k have all left the window: the newest's
-- instant plus the window (eff when none).
local function resetOf(k)
  if #k == 0 then return eff end
  return sunpack('>I6', k, #k - 7) + win
end
if sum + cost > limit then
  -- Admitted once enough of the oldest kept entries have left: the first
  -- entry at which their costs reach sum + cost - limit leaves at t + window.
  local need, freed, i, at, c = sum + cost - limit, 0, first - 1, 0, 0
  repeat
    i = i + 1
    if i > fn then return {4, now, 0, 0, 0, 0, 0} end
    at, c = sunpack('>I6I2', g, 4 + 8 * i)
    freed = freed + c
  until freed >= need
  return {2, now, eff, limit, limit - sum, at + win - eff, newest + win}
end
kept = place(kept, eff, cost)
local reset = resetOf(kept)
redis.call('SET', KEYS[1], spack('>BI6I2I2', 39, eff, sum + cost, #kept / 8) .. kept .. ARGV[1],
  'PX', reset - now + grace)
return {1, now, eff, limit, limit - sum - cost, 0, reset}

end
local members = {member_fixed_window, member_sliding_counter, member_token_bucket, member_gcra, member_sliding_log, member_concurrency}
local argc = {6, 6, 7, 7, 6, 6}
local n = ARGV[1]
if not (n and find(n, '^[1-8]$')) then return {5, 0} end
n = n + 0
if #KEYS ~= n then return {5, 0} end
local out, pos = {1, n}, 2
for i = 1, n do
  local code = ARGV[pos]
  if not (code and find(code, '^[1-6]$')) then return {5, 0} end
  code = code + 0
  local c = argc[code]
  if pos + c > #ARGV then return {5, 0} end
  local args = {}
  for j = 1, c do args[j] = ARGV[pos + j] end
  pos = pos + c + 1
  local r = members[code]({KEYS[i]}, args, proxy)
  if r.err then return r end
  for j = 1, 7 do out[#out + 1] = r[j] end
  if r[1] ~= 1 then out[1] = 2 end
end
if pos ~= #ARGV + 1 then return {5, 0} end
if out[1] == 1 then
  for _, w in ipairs(writes) do real.call(unpack(w)) end
end
return out
