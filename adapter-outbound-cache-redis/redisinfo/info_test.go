package redisinfo_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
)

const sample = "# Server\r\nredis_version:7.0.15\r\nrun_id:abc:def\r\n\r\n# Commandstats\r\n" +
	"cmdstat_evalsha:calls=200,usec=3260,usec_per_call=16.30,rejected_calls=2,failed_calls=1\r\n" +
	"cmdstat_config|resetstat:calls=1,usec=81,usec_per_call=81.00\r\n\r\n# CPU\r\nused_cpu_sys:1.250000\r\n"

func TestParseAndField(t *testing.T) {
	t.Parallel()
	m := redisinfo.Parse(sample)
	assert.Equal(t, "7.0.15", m["redis_version"])
	assert.Equal(t, "abc:def", m["run_id"], "only the first colon separates")
	assert.Equal(t, "1.250000", m["used_cpu_sys"])
	assert.NotContains(t, m, "# Server")
	v, ok := redisinfo.Field(sample, "redis_version")
	assert.True(t, ok)
	assert.Equal(t, "7.0.15", v)
	_, ok = redisinfo.Field(sample, "redis")
	assert.False(t, ok, "a prefix is not a field")
}

func TestCommandStats(t *testing.T) {
	t.Parallel()
	st, err := redisinfo.CommandStats(sample)
	require.NoError(t, err)
	assert.Equal(t, redisinfo.CommandStat{Calls: 200, Usec: 3260, UsecPerCall: 16.30, RejectedCalls: 2, FailedCalls: 1}, st["evalsha"])
	assert.Equal(t, int64(1), st["config|resetstat"].Calls)
	assert.Len(t, st, 2)

	_, err = redisinfo.CommandStats("cmdstat_get:calls=x,usec=1\r\n")
	assert.ErrorIs(t, err, redisinfo.ErrMalformed)
	assert.ErrorContains(t, err, "cmdstat_get")
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want redisinfo.Version
		ok   bool
	}{
		{"7.0.15", redisinfo.Version{7, 0, 15}, true},
		{"6.2", redisinfo.Version{6, 2, 0}, true},
		{"7", redisinfo.Version{}, false},
		{"7.0.1.2", redisinfo.Version{}, false},
		{"7.x.1", redisinfo.Version{}, false},
		{"7.-1.1", redisinfo.Version{}, false},
		{"", redisinfo.Version{}, false},
	} {
		got, err := redisinfo.ParseVersion(tt.in)
		if !tt.ok {
			assert.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got)
	}
	a, b := redisinfo.Version{7, 0, 15}, redisinfo.Version{7, 2, 0}
	assert.Equal(t, -1, a.Compare(b))
	assert.Equal(t, 1, b.Compare(a))
	assert.Equal(t, 0, a.Compare(a))
}
