#!lua
--[[ rate-concurrency-refund-v1: give back what one concurrency admission took,
exactly and saturating (ADR 0025); never admits, never denies.
Spec: docs/programs.md and docs/contract.md. Bounds cite ratelimit/policy.go.
M = 2^53-1 (MaxExactInt), S = 2^45 (MaxServerMillis), H = MaxHorizonMillis.
A slot admitted at t is held until it is given back (the refund program)
or until t + maxHold, whichever is first: at eff it is held iff its
instant is after eff - maxHold.
KEYS[1]  the state value, a string (one key, nothing else is touched)
ARGV[1]  policy revision             1..M                       (A2)
ARGV[2]  units to refund             1..limit                   (A4)
ARGV[3]  maxClockRegressionMillis    0..H                       (A3)
ARGV[4]  cleanupGraceMillis          1..H
ARGV[5]  limit (slots)               1..10000                   (C1)
ARGV[6]  maxHoldMillis               1..H-grace                 (C2)
Every ARGV is a canonical decimal integer (no sign, no leading zero).
Stored value (ADR 0010, ADR 0024, ADR 0041): the sliding log's, one string,
'>BI6I2I2', n holds '>I6I2', then the revision:
  v  schema version, 2 (high 4 bits of the first byte)
  a  algorithm, 7 (low 4 bits of the first byte; concurrency)
  l  lastObservedMillis, 0..S: the effective instant of the last write
  s  the slots held, the sum of the holds' costs, n..limit
  n  the number of holds, 1..s
  holds, oldest first: (t, c), the millisecond t <= l of one admission
     and the slots c it holds, in the order admitted
  r  policy revision, = ARGV[1] (the bytes after the holds)
Only admissions are stored, one hold each; a hold whose maxHold has passed
is dropped by the next write, a hold given back by the refund program. A
missing key holds no slot. Holds admitted in the same millisecond with the
same cost are interchangeable: giving back either frees the same slots
until the same instant.
Reply, 7 integers: status, serverNowMillis, effectiveNowMillis, limit,
  remaining, retryAfterMillis, resetAtMillis
  1 ALLOWED / 2 DENIED: every field set; a denial writes nothing.
  3 CLOCK_UNSAFE: server time beyond S: all fields 0 but the status; clock
    behind l by more than the tolerated regression: serverNow, effectiveNow = l,
    retryAfter = l - serverNow - regression, the rest 0. Nothing written.
  4 STATE_INCOMPATIBLE: serverNow (0 beyond S), the rest 0. Nothing written.
  5 INVALID (KEYS/ARGV count, syntax or range): as 4. Nothing written.
Write (ALLOWED only): SET the value with PX (resetAt - serverNow) + grace.
Refund (not a decision; the reply above reads as follows):
ARGV[n]  atMillis, the admission's effectiveNowMillis (its receipt) 0..S
  (n = #ARGV = 7; ARGV[2] is the admission's cost.) After the clock
  check: status 1 always, retryAfterMillis replaced by the units given back
  (0: the receipt is stale, nothing written), remaining and resetAt as the
  state left answers them. A state the refund empties is deleted.
Refund (release): after pruning, the newest kept hold (at, units) is
  removed (none: a no-op, the hold had expired); deleted when none is left.
  Remaining limit - sum; resetAt the newest kept hold + maxHold (eff when
  none is kept).
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

if #KEYS ~= 1 or #ARGV ~= 7 then return {5, now, 0, 0, 0, 0, 0} end
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
local at = int(ARGV[#ARGV])
if not (at and at <= S) then return {5, now, 0, 0, 0, 0, 0} end

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
-- The refund removes the newest kept entry (at, cost); the entries are in
-- admission order, so the scan stops at the first one older than at.
local idx = 0
if fl then
  for i = fn, first, -1 do
    local et, ec = sunpack('>I6I2', g, 4 + 8 * i)
    if et < at then break end
    if et == at and ec == cost then
      idx = i
      break
    end
  end
end
local back = 0
local reset = eff
if fl and first <= fn then reset = newest + win end
if idx > 0 then
  back = cost
  sum = sum - cost
  kept = sub(g, 4 + 8 * first, 3 + 8 * idx) .. sub(g, 12 + 8 * idx, 11 + 8 * fn)
  if #kept > 0 then
    reset = sunpack('>I6', kept, #kept - 7) + win
    redis.call('SET', KEYS[1], spack('>BI6I2I2', 39, eff, sum, #kept / 8) .. kept .. ARGV[1],
      'PX', reset - now + grace)
  else
    reset = eff
    redis.call('DEL', KEYS[1])
  end
end
return {1, now, eff, limit, limit - sum, back, reset}
