package programs

import (
	"crypto/sha1" //nolint:gosec // EVALSHA's hash
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs/luasrc"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestManifestMatchesSources fails when a program was edited without
// regenerating manifest.json (go generate ./...).
func TestManifestMatchesSources(t *testing.T) {
	require.NoError(t, Verify())
	want, err := GenerateManifest()
	require.NoError(t, err)
	onDisk, err := os.ReadFile(ManifestFile)
	require.NoError(t, err)
	require.Equal(t, string(want), string(manifestJSON), "embedded manifest is stale: run go generate")
	require.Equal(t, string(want), string(onDisk))

	all := All()
	require.Len(t, all, len(algorithms))
	for i, p := range all {
		file, err := os.ReadFile(p.Name + ".lua")
		require.NoError(t, err)
		require.Equal(t, string(file), p.Source, "%s: Source is the file byte for byte", p.Name)
		sum := sha1.Sum(file) //nolint:gosec // EVALSHA's hash
		require.Equal(t, hex.EncodeToString(sum[:]), p.SHA1, p.Name)
		require.Equal(t, algorithms[i], p.Algorithm)
		require.Equal(t, 1, p.Version)
		require.Equal(t, "7.0.0", p.MinRedisVersion)
		got, ok := ForAlgorithm(p.Algorithm)
		require.True(t, ok)
		require.Equal(t, p, got)
	}
	_, ok := ForAlgorithm(0)
	require.False(t, ok)
	_, ok = ForAlgorithm(ratelimit.AlgorithmConcurrency + 1)
	require.False(t, ok)
}

// TestManifestRejectsMismatch feeds the catalog builder manifests that do not
// describe the sources; each must be refused with ErrManifest.
func TestManifestRejectsMismatch(t *testing.T) {
	good, err := GenerateManifest()
	require.NoError(t, err)
	_, err = buildCatalog(good, definitions())
	require.NoError(t, err)

	edited := definitions()
	edited[1].source += "-- an edit\n"
	_, err = buildCatalog(good, edited)
	require.ErrorIs(t, err, ErrManifest, "edited source, stale manifest")
	require.ErrorContains(t, err, "rate-sliding-counter-v1 sha1")

	replace := func(old, new string) []byte {
		require.Contains(t, string(good), old)
		return []byte(strings.Replace(string(good), old, new, 1))
	}
	cases := map[string][]byte{
		"not json":        []byte("{"),
		"unknown field":   replace(`"format"`, `"extra": 1, "format"`),
		"format":          replace(ManifestFormat, "rate-programs-manifest/v2"),
		"version":         replace(`"version": 1`, `"version": 2`),
		"algorithm":       replace(`"algorithm": "fixed_window"`, `"algorithm": "token_bucket"`),
		"name":            replace(`"name": "rate-token-bucket-v1"`, `"name": "rate-token-bucket-v2"`),
		"file":            replace(`"file": "rate-token-bucket-v1.lua"`, `"file": "x.lua"`),
		"min version":     replace(`"minRedisVersion": "7.0.0"`, `"minRedisVersion": "6.2.0"`),
		"sha1":            replace(`"sha1": "`, `"sha1": "0`),
		"missing program": []byte(`{"format":"` + ManifestFormat + `","programs":[]}`),
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := buildCatalog(raw, definitions())
			require.ErrorIs(t, err, ErrManifest)
		})
	}
}

// luaConst extracts `local NAME = 123` from a program.
func luaConst(t *testing.T, src, name string) int64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^local ` + name + ` = (\d+)`).FindStringSubmatch(src)
	require.NotNil(t, m, "constant %s", name)
	n, ok := parseInt(m[1])
	require.True(t, ok)
	return n
}

// TestProgramSourceRules checks the program texts for the rules that are
// visible in the source: shebang first, TIME called exactly once, one key,
// one SET ... PX (the only write), one GET, no float literal, no n+d-1
// ceiling, the numeric edges equal to the shared contract's, and a header
// that documents every ARGV and stored field the Go side names.
func TestProgramSourceRules(t *testing.T) {
	floatLit := regexp.MustCompile(`\b\d+\.\d+|\d[eE][+-]?\d`)
	for _, p := range append(All(), Charges()...) {
		t.Run(p.Name, func(t *testing.T) {
			src := p.Source
			require.True(t, strings.HasPrefix(src, "#!lua\n"), "first line is exactly #!lua")
			code := stripLuaComments(src)
			assert.Equal(t, 1, strings.Count(code, "redis.call('TIME')"), "TIME exactly once")
			assert.Equal(t, 1, strings.Count(strings.ToUpper(code), "TIME"), "no other TIME")
			assert.Equal(t, 1, strings.Count(code, "'SET'"), "one SET")
			for _, banned := range []string{"'HSET'", "'HGETALL'", "'PEXPIRE'"} {
				assert.NotContains(t, code, banned, "the state is one string")
			}
			assert.Equal(t, 1, strings.Count(code, "'GET'"), "one read")
			assert.Regexp(t, `redis\.call\('SET', KEYS\[1\], [^\n]*(\n\s*)?'PX', reset - now \+ grace\)`, code, "every write sets its TTL")
			assert.NotRegexp(t, `KEYS\[[02-9]`, code, "one key only")
			assert.NotContains(t, code, "'PX', -", "no negative TTL")
			for _, banned := range []string{"PERSIST", "tostring(", "string.format", "math.ceil", "math.huge"} {
				assert.NotContains(t, code, banned)
			}
			assert.NotRegexp(t, `\+ \w+ - 1\b`, code, "no n + d - 1 ceiling")
			assert.Empty(t, floatLit.FindAllString(code, -1), "no float literal")
			assert.Equal(t, ratelimit.MaxExactInt, luaConst(t, src, "M"))
			assert.Equal(t, ratelimit.MaxServerMillis, luaConst(t, src, "S"))
			assert.Equal(t, ratelimit.MaxHorizonMillis, luaConst(t, src, "H"))
			assert.Equal(t, ratelimit.MaxServerMillis/1000, luaConst(t, src, "SECMAX"))
			if p.Algorithm == ratelimit.AlgorithmSlidingWindowCounter {
				assert.Equal(t, ratelimit.WeightScale, luaConst(t, src, "Q"))
				assert.Equal(t, ratelimit.MaxExactInt/ratelimit.WeightScale, luaConst(t, src, "QMAX"))
			}
			if p.Algorithm == ratelimit.AlgorithmFixedWindow {
				assert.Contains(t, code, fmt.Sprintf("limit <= %d", ratelimit.MaxExactInt/2), "F1")
			}
			assert.Contains(t, code, fmt.Sprintf("#ARGV ~= %d", p.ArgCount))
			header := src[:strings.Index(src, "]]")]
			for i := 1; i <= p.ArgCount; i++ {
				assert.Contains(t, header, fmt.Sprintf("ARGV[%d]", i))
			}
			for _, f := range stateFields(p.Algorithm) {
				assert.Regexp(t, `(?m)^  `+f+`  `, header, "stored field %q documented", f)
			}
			format, hdr := stateFormat(p.Algorithm), SchemaVersion<<4|int(p.Algorithm)
			assert.Contains(t, code, fmt.Sprintf("fh == %d", hdr), "schema and algorithm are checked")
			if compactArrival(p.Algorithm) {
				// ADR 0029: d in the fewest of 4..7 bytes, l's field carrying
				// the width; the length gives the width, checked first.
				assert.Contains(t, code, "local w, f = #g - 7 - #ARGV[1], '>BI6I7'", "the length gives d's width")
				assert.Contains(t, code, "elseif w ~= 7 then return {4, now, 0, 0, 0, 0, 0} end", "no other width")
				assert.Contains(t, code, "fl = fl - (7 - w) * 70368744177664", "l's field carries the width")
				assert.Contains(t, code, "fl >= 0 and fl <= S", "and the same width")
				for w := minArrivalWidth; w <= maxArrivalWidth; w++ {
					f := fmt.Sprintf(">BI6I%d", w)
					if w < maxArrivalWidth {
						assert.Contains(t, code, fmt.Sprintf("w == %d then f = '%s'", w, f), "width %d is read", w)
					}
					assert.Contains(t, code, fmt.Sprintf("nv = spack('%s', %d, ", f, hdr), "width %d is written", w)
				}
				assert.Contains(t, code, "sunpack(f, g)", "the stored layout is read")
				assert.Regexp(t, `nv \.\. ARGV\[1\], 'PX', reset - now \+ grace\)`, code, "the revision is written as sent")
				assert.Contains(t, code, "sub(g, n) == ARGV[1]", "the stored revision must be the one sent")
				return
			}
			assert.Contains(t, code, fmt.Sprintf("sunpack('%s', g)", format), "the stored layout is read")
			assert.Contains(t, code, fmt.Sprintf("spack('%s', %d, ", format, hdr), "the stored layout is written")
			if p.Algorithm == ratelimit.AlgorithmTokenBucket {
				// ADR 0042: with live leases, schema 3, the record count
				// and the records before the revision.
				assert.Contains(t, code, fmt.Sprintf("fh == %d and #g > %d + #ARGV[1]", (SchemaVersion+1)<<4|int(p.Algorithm), FixedStateBytes(p.Algorithm)), "a value with records is told by its header")
				assert.Contains(t, code, fmt.Sprintf("#g == %d + %d * ln + #ARGV[1]", FixedStateBytes(p.Algorithm)+1, LeaseRecordBytes), "the length holds the records")
				assert.Contains(t, code, fmt.Sprintf("#g < %d + #ARGV[1]", FixedStateBytes(p.Algorithm)), "the length is checked first")
				assert.Contains(t, code, fmt.Sprintf("fh == %d and #g == %d + #ARGV[1]", hdr, FixedStateBytes(p.Algorithm)), "a value without records has the fixed length")
				assert.Contains(t, code, "v .. ARGV[1], 'PX', reset - now + grace)", "the revision is written as sent")
				assert.Contains(t, code, "sub(g, n) == ARGV[1]", "the stored revision must be the one sent")
				return
			}
			assert.Regexp(t, `(\)|kept) \.\. ARGV\[1\],\n`, code, "the revision is written as sent")
			if p.Algorithm == ratelimit.AlgorithmSlidingLog || p.Algorithm == ratelimit.AlgorithmConcurrency {
				// The revision follows the n entries (ADR 0024).
				assert.Contains(t, code, fmt.Sprintf("limit <= %d", ratelimit.MaxSlidingLogLimit), "L1")
				assert.Contains(t, code, fmt.Sprintf("sub(g, %d + %d * fn) == ARGV[1]", FixedStateBytes(p.Algorithm)+1, LogEntryBytes), "the stored revision must be the one sent")
				assert.Contains(t, code, fmt.Sprintf("#g < %d + #ARGV[1]", FixedStateBytes(p.Algorithm)+LogEntryBytes), "the length is checked first")
				assert.Contains(t, code, fmt.Sprintf("#g == %d + %d * fn + #ARGV[1]", FixedStateBytes(p.Algorithm), LogEntryBytes), "the length holds the entries")
				return
			}
			assert.Contains(t, code, "sub(g, n) == ARGV[1]", "the stored revision must be the one sent")
			assert.Contains(t, code, fmt.Sprintf("#g ~= %d + #ARGV[1]", FixedStateBytes(p.Algorithm)), "the length is checked first")
		})
	}
}

// stripLuaComments drops the shebang, the --[[ ]] header and -- comments.
func stripLuaComments(src string) string {
	src = src[strings.Index(src, "]]")+2:]
	var b strings.Builder
	for _, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestSourcesAreRendered fails when a checked-in program file differs from
// what luasrc renders from the per-algorithm templates (go generate), and
// when a rendered program is not embedded or an embedded one not rendered.
func TestSourcesAreRendered(t *testing.T) {
	files, err := luasrc.Render()
	require.NoError(t, err)
	rendered := make([]string, len(files))
	sources := make(map[string]string, len(files))
	for i, f := range files {
		rendered[i] = f.Name
		sources[f.Name] = string(f.Source)
	}
	require.Equal(t, Names(), rendered, "luasrc renders exactly the embedded programs, in manifest order")
	for _, d := range definitions() {
		require.Equal(t, sources[d.name], d.source, "%s.lua is stale: run go generate", d.name)
	}
	m, err := ManifestFor(sources)
	require.NoError(t, err)
	require.Equal(t, string(manifestJSON), string(m))

	delete(sources, rendered[0])
	_, err = ManifestFor(sources)
	require.Error(t, err, "a missing source")
	sources["rate-other-v1"] = "#!lua\n"
	_, err = ManifestFor(sources)
	require.ErrorContains(t, err, rendered[0], "an unknown name instead of a defined one")
}
