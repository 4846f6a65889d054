#!lua
--[[ rate-sliding-counter-charge-v1: charge units without denying (reconciliation of
local emergency admits, docs/degraded-mode.md); otherwise as one sliding-window-counter
admission decision.
Spec: docs/programs.md and CONTRACT.md 4/4a. Bounds cite ratelimit/policy.go.
M = 2^53-1 (MaxExactInt), S = 2^45 (MaxServerMillis), H = MaxHorizonMillis,
Q = 1000000 (WeightScale).
KEYS[1]  the state hash (one key, nothing else is touched)
ARGV[1]  policy revision             1..M                       (A2)
ARGV[2]  units to charge             1..limit                   (A4)
ARGV[3]  maxClockRegressionMillis    0..H                       (A3)
ARGV[4]  cleanupGraceMillis          1..H
ARGV[5]  limit                       1..floor(M/Q)              (S1)
ARGV[6]  windowMillis                1..floor(M/Q), 2*window <= H-grace (S2, S3)
Every ARGV is a canonical decimal integer (no sign, no leading zero).
Stored fields (canonical decimal integers; exactly these seven):
  v  schema version, 1
  a  algorithm, 2 (sliding_window_counter)
  r  policy revision, = ARGV[1]
  l  lastObservedMillis, 0..S
  w  current window id, = floor(l / windowMillis)
  c  units admitted in window w, 1..limit
  p  units admitted in window w-1, 0..limit
Reply, 7 integers: status, serverNowMillis, effectiveNowMillis, limit,
  remaining, retryAfterMillis, resetAtMillis
  1 ALLOWED / 2 DENIED: every field set; a denial writes nothing.
  3 CLOCK_UNSAFE: server time beyond S: all fields 0 but the status; clock
    behind l by more than the tolerated regression: serverNow, effectiveNow = l,
    retryAfter = l - serverNow - regression, the rest 0. Nothing written.
  4 STATE_INCOMPATIBLE: serverNow (0 beyond S), the rest 0. Nothing written.
  5 INVALID (KEYS/ARGV count, syntax or range): as 4. Nothing written.
Write (ALLOWED only): HSET all seven fields, PEXPIRE (resetAt - serverNow) + grace.
Charge: exactly the state checks, clock and windows of
  rate-sliding-counter-v1, then c = min(limit, cur + units) in the current
  window (p as the decision program carries it); always status 1 (charged),
  retryAfter 0, remaining max(0, limit - ceil(p * weight / Q) - c),
  reset (k+2)*window; never DENIED.
]]
local M = 9007199254740991
local S = 35184372088832
local H = 9223372036854    -- floor((2^63-1) / 1e6): the longest time.Duration in ms
local Q = 1000000
local SECMAX = 35184372088 -- floor(S / 1000)
local QMAX = 9007199254    -- floor(M / Q)

local find = string.find

-- int parses a canonical non-negative decimal integer <= M (digits only, no
-- sign, no leading zero, at most 16 characters); nil otherwise, and for nil
-- (a missing field). Every caller passes a string (an ARGV, TIME or HGETALL
-- element) or nil. Once the pattern has matched, s + 0 converts it exactly as
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
  local sec, usec = int(t[1]), int(t[2])
  if sec ~= nil and usec ~= nil and sec <= SECMAX and usec < 1000000 then
    now = sec * 1000 + math.floor(usec / 1000)
    future = now > S
  end
  if future then now = 0 end
end

if #KEYS ~= 1 or #ARGV ~= 6 then return {5, now, 0, 0, 0, 0, 0} end
local rev, cost, reg, grace = int(ARGV[1]), int(ARGV[2]), int(ARGV[3]), int(ARGV[4])
local limit, win = int(ARGV[5]), int(ARGV[6])
if not (rev and rev >= 1 and reg and reg <= H and grace and grace >= 1 and grace <= H
    and limit and limit >= 1 and limit <= QMAX
    and win and win >= 1 and win <= QMAX and win <= math.floor((H - grace) / 2)
    and cost and cost >= 1 and cost <= limit) then
  return {5, now, 0, 0, 0, 0, 0}
end
if future then return {3, 0, 0, 0, 0, 0, 0} end

-- One HGETALL is the type check (WRONGTYPE: not a hash) and the read. The
-- hash must hold exactly the program's fields (14 elements). They are read by
-- position when they come in the order the HSET below writes them (Redis
-- keeps a small hash in insertion order, so that is every state this program
-- wrote), and by name otherwise. v, a and r are compared as strings: for a
-- valid n, int(x) == n exactly when x is n's canonical decimal, and ARGV[1]
-- is rev's (checked above).
local h = redis.pcall('HGETALL', KEYS[1])
if h.err then
  if find(h.err, '^WRONGTYPE') then return {4, now, 0, 0, 0, 0, 0} end
  return h
end
local fl, fw, fc, fp -- fl is nil when there is no state
if #h > 0 then
  if #h ~= 14 then return {4, now, 0, 0, 0, 0, 0} end
  local fv, fa, fr
  if h[1] == 'v' and h[3] == 'a' and h[5] == 'r' and h[7] == 'l'
      and h[9] == 'w' and h[11] == 'c' and h[13] == 'p' then
    fv, fa, fr, fl, fw, fc, fp = h[2], h[4], h[6], h[8], h[10], h[12], h[14]
  else
    local f = {}
    for i = 1, 13, 2 do f[h[i]] = h[i + 1] end
    fv, fa, fr, fl, fw, fc, fp = f.v, f.a, f.r, f.l, f.w, f.c, f.p
  end
  fl, fw, fc, fp = int(fl), int(fw), int(fc), int(fp)
  if not (fv == '1' and fa == '2' and fr == ARGV[1] and fl and fl <= S
      and fw and fw == math.floor(fl / win)
      and fc and fc >= 1 and fc <= limit
      and fp and fp <= limit) then
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
-- The charge consumes without denying and saturates at the limit.
local charged = cur + cost
if charged > limit then charged = limit end
-- S2: (win - e) * Q <= win * Q <= M; S1: prev * weight <= limit * Q <= M.
local weight = ceil((win - e) * Q, win)
local remaining = limit - ceil(prev * weight, Q) - charged
if remaining < 0 then remaining = 0 end
local reset = (k + 2) * win
-- v, a and r go as the strings a number would be formatted to, so Redis
-- formats only the computed fields.
redis.call('HSET', KEYS[1], 'v', '1', 'a', '2', 'r', ARGV[1], 'l', eff, 'w', k, 'c', charged, 'p', prev)
redis.call('PEXPIRE', KEYS[1], reset - now + grace)
return {1, now, eff, limit, remaining, 0, reset}
