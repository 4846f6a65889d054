package ratecarry

import "github.com/redis/go-redis/v9"

// checkScript reads, in one atomic step, whether the new state KEYS[1] or
// the carry's mark KEYS[3] exists and, when neither does, the
// predecessor's state KEYS[2] and the server's TIME: {1} when one exists,
// else {0, old or false, sec, usec}. It writes nothing. GET, not EXISTS:
// the service's ACL user already has GET.
var checkScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) or redis.call('GET', KEYS[3]) then return {1} end
local t = redis.call('TIME')
return {0, redis.call('GET', KEYS[2]), t[1], t[2]}
`)

// seedScript writes the carry when it still applies: the new state
// KEYS[1] and the mark KEYS[3] still missing and the predecessor's state
// KEYS[2] still ARGV[1] (the value the carry was computed from). ARGV[2]
// is the new state ("" to write none) with TTL ARGV[3] ms, ARGV[4] the
// emptied predecessor state ("" to leave it) with TTL ARGV[5] ms; the
// mark lives as long as the emptied state, so that no later check, after
// the new state expired, reads the emptied state as spent. It returns 1
// when written, 0 when the new state or the mark exists now, -1 when the
// predecessor's changed.
var seedScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) or redis.call('GET', KEYS[3]) then return 0 end
local old = redis.call('GET', KEYS[2]) or ''
if old ~= ARGV[1] then return -1 end
if ARGV[2] ~= '' then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
if ARGV[4] ~= '' then
  redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[5])
end
return 1
`)
