#!lua
--[[ rate-token-bucket-v1: one token-bucket admission decision.
Spec: docs/programs.md and CONTRACT.md 4/4a. Bounds cite ratelimit/policy.go.
M = 2^53-1 (MaxExactInt), S = 2^45 (MaxServerMillis), H = MaxHorizonMillis.
The level is kept exactly, scaled by the period P: level = t + m/P, and the
scaled level s = t*P + m never exceeds the full level C*P <= M (T1).
KEYS[1]  the state hash (one key, nothing else is touched)
ARGV[1]  policy revision             1..M                       (A2)
ARGV[2]  cost                        1..capacity                (A4)
ARGV[3]  maxClockRegressionMillis    0..H                       (A3)
ARGV[4]  cleanupGraceMillis          1..H
ARGV[5]  capacity C                  1..floor(M/P)              (T1)
ARGV[6]  refillTokens R              1..M, ceil(C*P/R) <= H-grace (T2)
ARGV[7]  refillPeriodMillis P        1..H
Every ARGV is a canonical decimal integer (no sign, no leading zero).
Stored fields (canonical decimal integers; exactly these six):
  v  schema version, 1
  a  algorithm, 3 (token_bucket)
  r  policy revision, = ARGV[1]
  l  lastObservedMillis, 0..S; also the last refill instant (every write
     refills up to the instant it is made at)
  t  whole tokens after the last admission, 0..C-1
  m  sub-token remainder in 1/P tokens, 0..P-1
A missing key is a full bucket.
Reply, 7 integers: status, serverNowMillis, effectiveNowMillis, limit (= C),
  remaining, retryAfterMillis, resetAtMillis
  1 ALLOWED / 2 DENIED: every field set; a denial writes nothing.
  3 CLOCK_UNSAFE: server time beyond S: all fields 0 but the status; clock
    behind l by more than the tolerated regression: serverNow, effectiveNow = l,
    retryAfter = l - serverNow - regression, the rest 0. Nothing written.
  4 STATE_INCOMPATIBLE: serverNow (0 beyond S), the rest 0. Nothing written.
  5 INVALID (KEYS/ARGV count, syntax or range): as 4. Nothing written.
Write (ALLOWED only): HSET all six fields, PEXPIRE (resetAt - serverNow) + grace.
]]
local M = 9007199254740991
local S = 35184372088832
local H = 9223372036854    -- floor((2^63-1) / 1e6): the longest time.Duration in ms
local SECMAX = 35184372088 -- floor(S / 1000)

-- int parses a canonical non-negative decimal integer <= M; nil otherwise.
local function int(s)
  if type(s) ~= 'string' or #s > 16 then return nil end
  if s ~= '0' and not string.find(s, '^[1-9][0-9]*$') then return nil end
  local n = tonumber(s)
  if n == nil or n > M then return nil end
  return n
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

if #KEYS ~= 1 or #ARGV ~= 7 then return {5, now, 0, 0, 0, 0, 0} end
local rev, cost, reg, grace = int(ARGV[1]), int(ARGV[2]), int(ARGV[3]), int(ARGV[4])
local cap, rate, per = int(ARGV[5]), int(ARGV[6]), int(ARGV[7])
if not (rev and rev >= 1 and reg and reg <= H and grace and grace >= 1 and grace <= H
    and per and per >= 1 and per <= H and rate and rate >= 1
    and cap and cap >= 1 and cap <= math.floor(M / per)
    and ceil(cap * per, rate) <= H - grace
    and cost and cost >= 1 and cost <= cap) then
  return {5, now, 0, 0, 0, 0, 0}
end
if future then return {3, 0, 0, 0, 0, 0, 0} end

local h = redis.pcall('HGETALL', KEYS[1])
if h.err then
  if string.find(h.err, '^WRONGTYPE') then return {4, now, 0, 0, 0, 0, 0} end
  return h
end
local f = nil
if #h > 0 then
  if #h ~= 12 then return {4, now, 0, 0, 0, 0, 0} end
  f = {}
  for i = 1, 11, 2 do f[h[i]] = int(h[i + 1]) end
  if not (f.v == 1 and f.a == 3 and f.r == rev and f.l and f.l <= S
      and f.t and f.t < cap and f.m and f.m < per) then
    return {4, now, 0, 0, 0, 0, 0}
  end
end

local eff = now
if f and now < f.l then
  if f.l - now > reg then return {3, now, f.l, 0, 0, f.l - now - reg, 0} end
  eff = f.l
end

-- T1: every scaled quantity below is at most full = C*P <= M.
local full = cap * per
local s = full
if f then
  s = f.t * per + f.m
  -- Compare the elapsed time with the time to fill before multiplying: when
  -- it is shorter, elapsed * R < full - s, so the sum stays below full.
  if eff - f.l >= ceil(full - s, rate) then
    s = full
  else
    s = s + (eff - f.l) * rate
  end
end
local need = cost * per
if s >= need then
  local after = s - need
  local tokens = math.floor(after / per)
  local reset = eff + ceil(full - after, rate) -- T2
  redis.call('HSET', KEYS[1], 'v', 1, 'a', 3, 'r', rev, 'l', eff, 't', tokens, 'm', after - tokens * per)
  redis.call('PEXPIRE', KEYS[1], reset - now + grace)
  return {1, now, eff, cap, tokens, 0, reset}
end
return {2, now, eff, cap, math.floor(s / per), ceil(need - s, rate), eff + ceil(full - s, rate)}
