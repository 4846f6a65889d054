#!lua
--[[ rate-fixed-window-v1: one fixed-window admission decision.
Spec: docs/programs.md and CONTRACT.md 4/4a. Bounds cite ratelimit/policy.go.
M = 2^53-1 (MaxExactInt), S = 2^45 (MaxServerMillis), H = MaxHorizonMillis.
KEYS[1]  the state hash (one key, nothing else is touched)
ARGV[1]  policy revision             1..M                       (A2)
ARGV[2]  cost                        1..limit                   (A4)
ARGV[3]  maxClockRegressionMillis    0..H                       (A3)
ARGV[4]  cleanupGraceMillis          1..H
ARGV[5]  limit                       1..floor(M/2)              (F1)
ARGV[6]  windowMillis                1..H-grace                 (F2)
Every ARGV is a canonical decimal integer (no sign, no leading zero).
Stored fields (canonical decimal integers; exactly these six):
  v  schema version, 1
  a  algorithm, 1 (fixed_window)
  r  policy revision, = ARGV[1]
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
    and limit and limit >= 1 and limit <= 4503599627370495
    and win and win >= 1 and win <= H - grace
    and cost and cost >= 1 and cost <= limit) then
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
  if not (f.v == 1 and f.a == 1 and f.r == rev and f.l and f.l <= S
      and f.w and f.w == math.floor(f.l / win)
      and f.c and f.c >= 1 and f.c <= limit) then
    return {4, now, 0, 0, 0, 0, 0}
  end
end

local eff = now
if f and now < f.l then
  if f.l - now > reg then return {3, now, f.l, 0, 0, f.l - now - reg, 0} end
  eff = f.l
end

local k = math.floor(eff / win)
local used = 0
if f and f.w == k then used = f.c end
local reset = (k + 1) * win
if used + cost > limit then
  return {2, now, eff, limit, limit - used, reset - eff, reset}
end
redis.call('HSET', KEYS[1], 'v', 1, 'a', 1, 'r', rev, 'l', eff, 'w', k, 'c', used + cost)
redis.call('PEXPIRE', KEYS[1], reset - now + grace)
return {1, now, eff, limit, limit - used - cost, 0, reset}
