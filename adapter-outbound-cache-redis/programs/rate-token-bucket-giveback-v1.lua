#!lua
--[[ rate-token-bucket-giveback-v1: give back a lease's unspent units (ADR 0042);
never admits, never denies.
Spec: docs/programs.md and docs/contract.md. Bounds cite ratelimit/policy.go.
M = 2^53-1 (MaxExactInt), S = 2^45 (MaxServerMillis), H = MaxHorizonMillis.
The level is kept exactly, scaled by the period P: level = t + m/P, and the
scaled level s = t*P + m never exceeds the full level C*P <= M (T1).
KEYS[1]  the state value, a string (one key, nothing else is touched)
ARGV[1]  policy revision             1..M                       (A2)
ARGV[2]  units to give back          1..capacity                (A4)
ARGV[3]  maxClockRegressionMillis    0..H                       (A3)
ARGV[4]  cleanupGraceMillis          1..H
ARGV[5]  capacity C                  1..floor(M/P)              (T1)
ARGV[6]  refillTokens R              1..M, ceil(C*P/R) <= H-grace (T2)
ARGV[7]  refillPeriodMillis P        1..H
Every ARGV is a canonical decimal integer (no sign, no leading zero).
Stored value (ADR 0010): one string, '>BI6I7I6' then the revision:
  v  schema version, 2 (high 4 bits of the first byte)
  a  algorithm, 3 (low 4 bits of the first byte; token_bucket)
  r  policy revision, = ARGV[1] (the bytes after the packed fields)
  l  lastObservedMillis, 0..S; also the last refill instant (every write
     refills up to the instant it is made at)
  t  whole tokens after the last admission, 0..C-1
  m  sub-token remainder in 1/P tokens, 0..P-1
With live leases (ADR 0042) the first byte is 51 (schema 3) and the
packed fields are followed by their count n, 1..LMAX (one byte), and n
records '>I6I6I7' (at, end, units) before the revision: a lease reserved
at the effective instant at (its receipt's), ending at end, at <= end <=
S + H, holding units 1..C, the units of all records at most C. While a
record is live (end > eff) the level never refills above
C - (the units of the live records): refill never reaches leased units.
Every write drops the records that ended (end <= eff) and keeps the TTL
past the last end. A missing key is a full bucket.
Reply, 7 integers: status, serverNowMillis, effectiveNowMillis, limit (= C),
  remaining, retryAfterMillis, resetAtMillis
  1 ALLOWED / 2 DENIED: every field set; a denial writes nothing.
  3 CLOCK_UNSAFE: server time beyond S: all fields 0 but the status; clock
    behind l by more than the tolerated regression: serverNow, effectiveNow = l,
    retryAfter = l - serverNow - regression, the rest 0. Nothing written.
  4 STATE_INCOMPATIBLE: serverNow (0 beyond S), the rest 0. Nothing written.
  5 INVALID (KEYS/ARGV count, syntax or range): as 4. Nothing written.
Write (ALLOWED only): SET the value with PX (resetAt - serverNow) + grace.
Give-back (not a decision; the reply above reads as follows):
ARGV[n-1] atMillis, the reservation's effectiveNowMillis (its receipt) 0..S
ARGV[n]  ttlMillis, the lease's length  1..H
  (n = #ARGV = 9; ARGV[2] is the units to give back.) After the
  clock check: status 1 always, retryAfterMillis replaced by the units
  given back (0: no live lease was reserved at atMillis, nothing
  written), remaining and resetAt as the state left answers them.
Give-back: after the refill and cap, the live record reserved at atMillis
  is removed and min(units, its units) go back to the level, at most up
  to the new cap (deleted when full with no record left).
]]
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

if #KEYS ~= 1 or #ARGV ~= 9 then return {5, now, 0, 0, 0, 0, 0} end
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
local at, ttl = int(ARGV[#ARGV - 1]), int(ARGV[#ARGV])
if not (at and at <= S and ttl and ttl >= 1 and ttl <= H) then return {5, now, 0, 0, 0, 0, 0} end

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
-- A give-back (ADR 0042) removes the live record reserved at `at` and
-- returns at most its units to the level; a lease that ended, or was
-- never recorded, gives back nothing (its units refill at the rate).
local back, j = 0, nil
for i = 1, kn do
  if lt[i] == at then j = i end
end
local after = s
if j then
  back = cost
  if back > lu[j] then back = lu[j] end
  back = back * per
  top = top + lu[j] * per
  table.remove(lt, j)
  table.remove(le, j)
  table.remove(lu, j)
  kn = kn - 1
  lend = 0
  for i = 1, kn do
    if le[i] > lend then lend = le[i] end
  end
  after = s + back
  if after > top then after = top end
  back = after - s
  if after < full then
    put(after, resetOf(after))
  else
    redis.call('DEL', KEYS[1])
  end
end
return {1, now, eff, cap, math.floor(after / per), ceil(back, per), resetOf(after)}
