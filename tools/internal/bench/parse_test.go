package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
)

func TestInfoFloat(t *testing.T) {
	info := redisinfo.Parse("# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:x\r\n")
	v, err := infoFloat(info, "used_cpu_sys")
	require.NoError(t, err)
	assert.InDelta(t, 1.25, v, 1e-9)

	_, err = infoFloat(info, "used_memory")
	assert.Error(t, err)
	_, err = infoFloat(info, "used_cpu_user")
	assert.Error(t, err)
}

func TestParseBenchLine(t *testing.T) {
	for _, tc := range []struct {
		line   string
		ok     bool
		name   string
		ns     float64
		allocs float64
	}{
		{"BenchmarkKey-2 \t 1000000\t      449.9 ns/op\t      81 B/op\t       1 allocs/op", true, "BenchmarkKey", 449.9, 1},
		{"BenchmarkKey \t    1000\t       850.7 ns/op\t      81 B/op\t       1 allocs/op", true, "BenchmarkKey", 850.7, 1},
		{"BenchmarkParseReply-16   5000   12.5 ns/op   0 B/op   0 allocs/op   3.0 custom/op", true, "BenchmarkParseReply", 12.5, 0},
		{"BenchmarkKey", false, "", 0, 0},
		{"BenchmarkKey-2   12   notanumber ns/op", false, "", 0, 0},
		{"BenchmarkKey-2   12   10 B/op", false, "", 0, 0}, // no ns/op
		{"ok  \tgithub.com/x\t0.025s", false, "", 0, 0},
	} {
		l, ok := parseBenchLine(tc.line)
		require.Equal(t, tc.ok, ok, tc.line)
		if ok {
			assert.Equal(t, tc.name, l.name)
			assert.InDelta(t, tc.ns, l.metrics["ns/op"], 1e-9)
			assert.InDelta(t, tc.allocs, l.metrics["allocs/op"], 1e-9)
		}
	}
}

func TestParseTestJSONJoinsSplitOutput(t *testing.T) {
	// test2json may split one result line over several output events.
	data := []byte(`{"Action":"start","Package":"example.com/m/keyspace"}
{"Action":"output","Package":"example.com/m/keyspace","Test":"BenchmarkKey","Output":"BenchmarkKey\n"}
{"Action":"output","Package":"example.com/m/keyspace","Test":"BenchmarkKey","Output":"BenchmarkKey-2   \t"}
{"Action":"output","Package":"example.com/m/keyspace","Test":"BenchmarkKey","Output":"  1000\t 450 ns/op\t 81 B/op\t 1 allocs/op\n"}
{"Action":"output","Package":"example.com/m/other","Output":"BenchmarkX 10 5 ns/op\n"}
{"Action":"pass","Package":"example.com/m/keyspace"}
`)
	lines, err := parseTestJSON(data)
	require.NoError(t, err)
	require.Len(t, lines, 2)
	assert.Equal(t, "keyspace.BenchmarkKey", lines[0].name)
	assert.InDelta(t, 450, lines[0].metrics["ns/op"], 1e-9)
	assert.Equal(t, "other.BenchmarkX", lines[1].name)

	_, err = parseTestJSON([]byte("not json\n"))
	assert.Error(t, err)
}

func TestParseRedisBenchmarkCSV(t *testing.T) {
	good := []byte(`"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"EVAL return 1 0","38095.24","0.266","0.064","0.199","0.543","0.823","5.895"
`)
	r, err := parseRedisBenchmarkCSV(good)
	require.NoError(t, err)
	assert.InDelta(t, 38095.24, r.OpsPerSec, 1e-6)
	assert.InDelta(t, 199, r.P50Micros, 1e-6)
	assert.InDelta(t, 823, r.P99Micros, 1e-6)

	for name, bad := range map[string]string{
		"no rows":       `"test","rps"` + "\n",
		"missing p99":   "\"test\",\"rps\",\"p50_latency_ms\"\n\"EVAL\",\"1\",\"2\"\n",
		"non-numeric":   "\"test\",\"rps\",\"p50_latency_ms\",\"p99_latency_ms\"\n\"EVAL\",\"x\",\"2\",\"3\"\n",
		"two data rows": string(good) + `"EVAL","1","1","1","1","1","1","1"` + "\n",
	} {
		_, err := parseRedisBenchmarkCSV([]byte(bad))
		assert.Error(t, err, name)
	}
}
