#!lua
--[[ rate-gcra-giveback-v1: give back a lease's unspent units (ADR 0042);
never admits, never denies.
Spec: docs/programs.md and docs/contract.md. Bounds cite ratelimit/policy.go.
M = 2^53-1 (MaxExactInt), S = 2^45 (MaxServerMillis), H = MaxHorizonMillis.
Time is read in microseconds: the effective instant is eff ms plus frac us
(frac = the TIME reply's usec mod 1000 when eff is the server's own
millisecond, 0 when eff is a clamped l). The emission interval is P/R us
exactly (P, R reduced); the theoretical arrival time TAT is kept exactly as
l*1000 + d/R us, and every scaled quantity is at most B*P + 999*R <= M (G1).
KEYS[1]  the state value, a string (one key, nothing else is touched)
ARGV[1]  policy revision             1..M                       (A2)
ARGV[2]  units to give back          1..burst                   (A4)
ARGV[3]  maxClockRegressionMillis    0..H                       (A3)
ARGV[4]  cleanupGraceMillis          1..H
ARGV[5]  burst B                     1..floor((M-999*R)/P)      (G1)
ARGV[6]  rate R (emission: P/R us)   1..floor(M/999)            (G1)
ARGV[7]  periodMicros P              1.., ceil(ceil(B*P/R)/1000)+1 <= H-grace (G2)
Every ARGV is a canonical decimal integer (no sign, no leading zero).
Stored value (ADR 0010, ADR 0021, ADR 0029): one string, '>BI6Iw' then the
revision, w = 4..7 the width of d:
  v  schema version, 2 (high 4 bits of the first byte)
  a  algorithm, 4 (low 4 bits of the first byte; gcra)
  r  policy revision, = ARGV[1] (the bytes after the packed fields)
  l  lastObservedMillis, 0..S: the millisecond of the last admission; the
     6-byte field holds 2^46*(7-w) + l (S < 2^46)
  d  theoretical arrival time after l*1000 us, in 1/R us: TAT = l*1000 + d/R
     us; 0..B*P + 999*R; written in the fewest of 4..7 bytes that hold it
With live leases (ADR 0042) the first byte is 52 (schema 3) and d is
followed by the record count n, 1..LMAX (one byte), and n records
'>I6I6I7' (at, end, units) before the revision: a lease reserved at the
effective instant at (its receipt's), ending at end, at <= end <= S + H,
holding units 1..B, the units of all records at most B. While a record is
live (end > eff) TAT is at least the effective instant plus the live
records' units of emission intervals: the level never refills into leased
units. Every write drops the records that ended (end <= eff) and keeps the
TTL past the last end.
A missing key is an empty state (TAT in the past: B requests admitted at once).
Reply, 7 integers: status, serverNowMillis, effectiveNowMillis, limit (= B),
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
Give-back: the live record reserved at atMillis is removed and TAT moves
  back by min(units, its units) emission intervals, never below the
  effective instant plus the other live records' units (deleted when it
  reaches the effective instant with no record left).
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
local at, ttl = int(ARGV[#ARGV - 1]), int(ARGV[#ARGV])
if not (at and at <= S and ttl and ttl >= 1 and ttl <= H) then return {5, now, 0, 0, 0, 0, 0} end

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
-- A give-back (ADR 0042) removes the live record reserved at `at` and
-- moves TAT back by at most its units, never below the other live
-- records' floor; a lease that ended, or was never recorded, gives back
-- nothing.
local back, j = 0, nil
for i = 1, kn do
  if lt[i] == at then j = i end
end
local after = D
if j then
  live = live - lu[j]
  back = cost
  if back > lu[j] then back = lu[j] end
  back = back * per
  table.remove(lt, j)
  table.remove(le, j)
  table.remove(lu, j)
  kn = kn - 1
  lend = 0
  for i = 1, kn do
    if le[i] > lend then lend = le[i] end
  end
  after = D - back
  if after < live * per then after = live * per end
  back = D - after
end
local left = 0
if after < bp then left = math.floor((bp - after) / per) end
local reset = eff + ceil(ceil(frac * rate + after, rate), 1000) -- G2
if back > 0 then
  if after > 0 then
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
  else
    redis.call('DEL', KEYS[1])
  end
end
return {1, now, eff, burst, left, ceil(back, per), reset}
