#!lua
--[[ rate-sliding-log-giveback-v1: give back a lease's unspent units (ADR 0042);
never admits, never denies.
Spec: docs/programs.md and docs/contract.md. Bounds cite ratelimit/policy.go.
M = 2^53-1 (MaxExactInt), S = 2^45 (MaxServerMillis), H = MaxHorizonMillis.
An entry is in the window at eff iff its instant is after eff - window.
KEYS[1]  the state value, a string (one key, nothing else is touched)
ARGV[1]  policy revision             1..M                       (A2)
ARGV[2]  units to give back          1..limit                   (A4)
ARGV[3]  maxClockRegressionMillis    0..H                       (A3)
ARGV[4]  cleanupGraceMillis          1..H
ARGV[5]  limit                       1..10000                   (L1)
ARGV[6]  windowMillis                1..H-grace                 (L2)
Every ARGV is a canonical decimal integer (no sign, no leading zero).
Stored value (ADR 0010, ADR 0024): one string, '>BI6I2I2', n entries
'>I6I2', then the revision:
  v  schema version, 2 (high 4 bits of the first byte)
  a  algorithm, 5 (low 4 bits of the first byte; sliding_log)
  l  lastObservedMillis, 0..S: the effective instant of the last write
  s  the sum of the entries' costs, n..limit
  n  the number of entries, 1..s
  entries, oldest first: (t, c), the millisecond t of one admission and
     its cost c, in instant order (the order admitted); t <= l, but a
     lease's entry (ADR 0042), at its end, t <= l + window
  r  policy revision, = ARGV[1] (the bytes after the entries)
Only admissions are stored, one entry each; entries that left the window
are dropped by the next write. A lease is stored as admitted at its end:
its entry counts from the reservation until a window after its end. A
missing key is an empty log.
Work per call: the header and the newest entry are read in O(1); pruning
unpacks the dropped entries only (none once the newest has left: the log
is then empty); the sum is kept, never recomputed; only a denial scans
the oldest entries for the retry. The value is copied once per write.
Reply, 7 integers: status, serverNowMillis, effectiveNowMillis, limit,
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
  (n = #ARGV = 8; ARGV[2] is the units to give back.) After the
  clock check: status 1 always, retryAfterMillis replaced by the units
  given back (0: no live lease was reserved at atMillis, nothing
  written), remaining and resetAt as the state left answers them.
Give-back: after pruning, the entries at atMillis + ttl (the lease's, and
  any admitted at that millisecond: interchangeable) lose up to the units
  given back, an entry left at 0 is removed; deleted when none is left.
]]
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

if #KEYS ~= 1 or #ARGV ~= 8 then return {5, now, 0, 0, 0, 0, 0} end
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
local at, ttl = int(ARGV[#ARGV - 1]), int(ARGV[#ARGV])
if not (at and at <= S and ttl and ttl >= 1 and ttl <= H) then return {5, now, 0, 0, 0, 0, 0} end

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
-- A give-back (ADR 0042) lowers the entries at the lease's end by up to
-- the unspent units; entries of one millisecond are interchangeable (an
-- admission made then is counted the same), so it takes from the newest.
local e, back = at + ttl, 0
local n = #kept / 8
local j = n
while j >= 1 and sunpack('>I6', kept, 8 * j - 7) > e do j = j - 1 end
local i, mid = j, ''
while i >= 1 and back < cost do
  local t, c = sunpack('>I6I2', kept, 8 * i - 7)
  if t ~= e then break end
  local d = cost - back
  if d > c then d = c end
  back = back + d
  if c > d then mid = spack('>I6I2', t, c - d) .. mid end
  i = i - 1
end
local reset = resetOf(kept)
if back > 0 then
  kept = sub(kept, 1, 8 * i) .. mid .. sub(kept, 8 * j + 1)
  sum = sum - back
  reset = resetOf(kept)
  if #kept > 0 then
    redis.call('SET', KEYS[1], spack('>BI6I2I2', 37, eff, sum, #kept / 8) .. kept .. ARGV[1],
      'PX', reset - now + grace)
  else
    redis.call('DEL', KEYS[1])
  end
end
return {1, now, eff, limit, limit - sum, back, reset}
