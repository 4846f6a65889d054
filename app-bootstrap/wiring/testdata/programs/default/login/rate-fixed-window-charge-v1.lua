#!lua
-- rate-fixed-window-charge-v1 bound to revision 3 of one policy (ADR 0030)
--[[ rate-fixed-window-charge-v1: charge units without denying (reconciliation of
local emergency admits, docs/degraded-mode.md); otherwise as one fixed-window
admission decision.
Spec: docs/programs.md and docs/contract.md. Bounds cite ratelimit/policy.go.
M = 2^53-1 (MaxExactInt), S = 2^45 (MaxServerMillis), H = MaxHorizonMillis.
KEYS[1]  the state value, a string (one key, nothing else is touched)
ARGV[1]  policy revision             1..M                       (A2)
ARGV[2]  units to charge             1..limit                   (A4)
ARGV[3]  maxClockRegressionMillis    0..H                       (A3)
ARGV[4]  cleanupGraceMillis          1..H
ARGV[5]  limit                       1..floor(M/2)              (F1)
ARGV[6]  windowMillis                1..H-grace                 (F2)
Every ARGV is a canonical decimal integer (no sign, no leading zero).
Stored value (ADR 0010): one string, '>BI6I6I7' then the revision:
  v  schema version, 2 (high 4 bits of the first byte)
  a  algorithm, 1 (low 4 bits of the first byte; fixed_window)
  r  policy revision, = ARGV[1] (the bytes after the packed fields)
  l  lastObservedMillis, 0..S
  w  window id, = floor(l / windowMillis)
  c  units consumed in window w, 1..limit
Reply, 7 integers: status, serverNowMillis, effectiveNowMillis, limit,
  remaining, retryAfterMillis, resetAtMillis
  1 ALLOWED / 2 DENIED: every field set; a denial writes nothing.
  3 CLOCK_UNSAFE: server time beyond S: all fields 0 but the status; clock
    behind l by more than the tolerated regression: serverNow, effectiveNow = l,
    retryAfter = l - serverNow - regression, the rest 0. Nothing written.
  4 STATE_INCOMPATIBLE: serverNow (0 beyond S), the rest 0. Nothing written.
  5 INVALID (KEYS/ARGV count, syntax or range): as 4. Nothing written.
Write (ALLOWED only): SET the value with PX (resetAt - serverNow) + grace.
Charge: exactly the state checks, clock and window of rate-fixed-window-v1,
  then c = min(limit, used + units) in the current window; always status 1
  (charged), retryAfter 0, remaining limit - c; never DENIED.
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

if #KEYS ~= 1 or #ARGV ~= 2 then return {5, now, 0, 0, 0, 0, 0} end
-- Bound to one policy revision (ADR 0030): the parameters are constants,
-- range-checked below as ARGV are; ARGV is the revision and the cost.
local rev, cost, reg, grace, limit, win = 3, ARGV[2], 2000, 60000, 5, 60000
if ARGV[1] == '3' and find(cost, POS) then
  cost = cost + 0
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
-- The charge consumes without denying and saturates at the limit.
local charged = used + cost
if charged > limit then charged = limit end
redis.call('SET', KEYS[1], spack('>BI6I6I7', 33, eff, k, charged) .. ARGV[1],
  'PX', reset - now + grace)
return {1, now, eff, limit, limit - charged, 0, reset}
