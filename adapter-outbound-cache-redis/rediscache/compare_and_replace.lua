#!lua
--[[
rediscache compare-and-replace, stored layout "c1" (docs/cache.md).

KEYS[1]  the physical cache key (keyspace capability "cache"). A string whose
         first 34 bytes are the version header: "c1" followed by 32 lowercase
         hex digits; the cached value follows the header.
ARGV[1]  the expected header, i.e. the observation token: exactly 34 bytes.
ARGV[2]  the replacement: a fresh 34-byte header followed by the new value
         (at most 1048576 value bytes).
ARGV[3]  the TTL in milliseconds: a decimal integer in 1..2592000000.

Stored: KEYS[1] = ARGV[2] with PEXPIRE ARGV[3] (one SET ... PX command, so the
value and its finite TTL appear together).

Reply (integer):
   1  replaced
   0  not replaced: KEYS[1] is absent or its header differs from ARGV[1]
  -1  invalid arguments: nothing read, nothing written
  -2  KEYS[1] holds a non-string type: nothing written

Every validation and the single read happen before the only write; the read
takes the header only (GETRANGE), never the value.
]]
local HEADER_LEN = 34
local MAX_VALUE_LEN = 1048576
local MAX_TTL_MS = 2592000000

local REPLACED = 1
local NOT_REPLACED = 0
local INVALID = -1
local WRONG_TYPE = -2

local function is_header(s)
  return #s == HEADER_LEN and string.find(s, '^c1[0-9a-f]+$') ~= nil
end

if #KEYS ~= 1 or #ARGV ~= 3 then
  return INVALID
end
local expected, replacement, ttl = ARGV[1], ARGV[2], ARGV[3]
if not is_header(expected) then
  return INVALID
end
if #replacement < HEADER_LEN or #replacement > HEADER_LEN + MAX_VALUE_LEN
    or not is_header(string.sub(replacement, 1, HEADER_LEN)) then
  return INVALID
end
if #ttl > 10 or string.find(ttl, '^[1-9][0-9]*$') == nil or tonumber(ttl) > MAX_TTL_MS then
  return INVALID
end

local current = redis.pcall('GETRANGE', KEYS[1], 0, HEADER_LEN - 1)
if type(current) == 'table' and current.err then
  return WRONG_TYPE
end
if current ~= expected then
  return NOT_REPLACED
end
redis.call('SET', KEYS[1], replacement, 'PX', ttl)
return REPLACED
