package rlsconfig_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func mustLoad(t *testing.T, text string) *rlsconfig.Config {
	t.Helper()
	c, err := rlsconfig.Load([]rlsconfig.File{{Name: "t.yaml", Data: []byte(text)}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func es(kv ...string) []rlsconfig.Entry {
	out := make([]rlsconfig.Entry, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, rlsconfig.Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

const matching = `
domain: d
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: user
    value: "vip*"
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: user
    value: vip-alice
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: user
    value: bob
  - key: path
    value: /api
    descriptors:
      - key: method
        rate_limit: {unit: second, requests_per_unit: 4, name: api}
      - key: method
        value: POST
        shadow_mode: true
        rate_limit: {unit: second, requests_per_unit: 5, name: api_post, replaces: [{name: api}]}
  - key: free
    rate_limit: {unlimited: true, name: free, replaces: [{name: api}]}
`

func TestMatchMostSpecific(t *testing.T) {
	c := mustLoad(t, matching)
	for _, tc := range []struct {
		name    string
		entries []rlsconfig.Entry
		want    int // requests per unit; -1 none
	}{
		{"exact value beats wildcard", es("user", "vip-alice"), 3},
		{"wildcard beats key only", es("user", "vip-bob"), 2},
		{"key only", es("user", "carol"), 1},
		{"value without limit whitelists", es("user", "bob"), -1},
		{"unknown key", es("team", "x"), -1},
		{"nested default", es("path", "/api", "method", "GET"), 4},
		{"nested exact", es("path", "/api", "method", "POST"), 5},
		{"fewer entries than the path: no limit at that depth", es("path", "/api"), -1},
		{"more entries than the path", es("user", "carol", "extra", "x"), -1},
		{"no entries", nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := c.Match("d", tc.entries)
			got := -1
			if rl != nil {
				got = int(rl.RequestsPerUnit)
			}
			if got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
	if c.Match("other", es("user", "x")) != nil || c.HasDomain("other") || !c.HasDomain("d") {
		t.Fatal("unknown domain")
	}
}

func TestMatchFlagsAndReplaces(t *testing.T) {
	c := mustLoad(t, matching)
	post := c.Match("d", es("path", "/api", "method", "POST"))
	if !post.ShadowMode || post.Unit != rlsconfig.UnitSecond || post.Name != "api_post" {
		t.Fatalf("POST limit: %+v", post)
	}
	get := c.Match("d", es("path", "/api", "method", "GET"))
	free := c.Match("d", es("free", "x"))
	if !free.Unlimited || free.Unit != 0 {
		t.Fatalf("free: %+v", free)
	}
	check, unlimited := rlsconfig.ApplyReplaces([]*rlsconfig.RateLimit{get, post, free, nil})
	if !reflect.DeepEqual(check, []*rlsconfig.RateLimit{nil, post, nil, nil}) || !reflect.DeepEqual(unlimited, []bool{false, false, true, false}) {
		t.Fatalf("ApplyReplaces: %v %v", check, unlimited)
	}
	// Without the replacing limit, api stays.
	check, _ = rlsconfig.ApplyReplaces([]*rlsconfig.RateLimit{get})
	if check[0] != get {
		t.Fatal("api replaced with nothing replacing it")
	}
}

func TestLimitsStableAndIdentical(t *testing.T) {
	c := mustLoad(t, matching)
	lim := c.Limits()
	var keys []string
	for i, l := range lim {
		if l.ID != i {
			t.Fatalf("Limits()[%d].ID = %d", i, l.ID)
		}
		keys = append(keys, l.FullKey)
	}
	want := []string{"d.free", "d.path_/api.method", "d.path_/api.method_POST", "d.user", "d.user_vip*", "d.user_vip-alice"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("Limits order %v, want %v", keys, want)
	}
	if c.Match("d", es("user", "vip-x")) != lim[4] {
		t.Fatal("Match does not return the configured pointer")
	}
	again := mustLoad(t, matching)
	for i, l := range again.Limits() {
		if l.FullKey != keys[i] {
			t.Fatal("Limits order differs between loads")
		}
	}
}

func TestShareThresholdCounter(t *testing.T) {
	c := mustLoad(t, `
domain: d
descriptors:
  - key: files
    value: "files/*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: own
    value: "own/*"
    rate_limit: {unit: minute, requests_per_unit: 100}
`)
	a, b := es("files", "files/a"), es("files", "files/b")
	ma, mb := c.Lookup("d", a), c.Lookup("d", b)
	if ma.Limit == nil || ma.CounterKey("d", a) != "d_files_files/*_" || ma.CounterKey("d", a) != mb.CounterKey("d", b) {
		t.Fatalf("shared counter: %q %q", ma.CounterKey("d", a), mb.CounterKey("d", b))
	}
	if ma.StatsKey != "d.files_files/*" {
		t.Fatalf("stats key %q", ma.StatsKey)
	}
	o1, o2 := es("own", "own/a"), es("own", "own/b")
	m1, m2 := c.Lookup("d", o1), c.Lookup("d", o2)
	if m1.CounterKey("d", o1) == m2.CounterKey("d", o2) || m1.ShareThresholdKeyPattern != nil {
		t.Fatal("a wildcard without share_threshold shares its counter")
	}
	if got := m1.CounterEntries(o1); &got[0] != &o1[0] {
		t.Fatal("CounterEntries copied entries without a shared value")
	}
}

func TestExtensions(t *testing.T) {
	c := mustLoad(t, `
domain: d
descriptors:
  - key: p
    rate_limit: {policy: login, name: pol}
  - key: tb
    rate_limit: {algorithm: token_bucket, capacity: 10, refill: 2, period: 1s}
  - key: gcra
    rate_limit: {algorithm: gcra, rate: 5, period: 1m, burst: 3}
  - key: log
    rate_limit: {algorithm: sliding_log, limit: 7, window: 30s}
  - key: swc
    rate_limit: {algorithm: sliding_window_counter, unit: minute, requests_per_unit: 9}
  - key: fw
    rate_limit: {algorithm: fixed_window, unit: hour, requests_per_unit: 11}
  - key: tbrate
    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 4}
`)
	for _, tc := range []struct {
		key    string
		policy string
		params ratelimit.Params
		unit   rlsconfig.Unit
	}{
		{"p", "login", nil, 0},
		{"tb", "", ratelimit.TokenBucket{Capacity: 10, RefillTokens: 2, RefillPeriod: time.Second}, 0},
		{"gcra", "", ratelimit.GCRA{Rate: 5, Period: time.Minute, Burst: 3}, 0},
		{"log", "", ratelimit.SlidingLog{Limit: 7, Window: 30 * time.Second}, 0},
		{"swc", "", ratelimit.SlidingWindowCounter{Limit: 9, Window: time.Minute}, rlsconfig.UnitMinute},
		{"fw", "", nil, rlsconfig.UnitHour},
		{"tbrate", "", ratelimit.TokenBucket{Capacity: 4, RefillTokens: 4, RefillPeriod: time.Second}, rlsconfig.UnitSecond},
	} {
		rl := c.Match("d", es(tc.key, "x"))
		if rl == nil || rl.Policy != tc.policy || rl.Unit != tc.unit {
			t.Fatalf("%s: %+v", tc.key, rl)
		}
		var got ratelimit.Params
		if rl.Algorithm != nil {
			got = rl.Algorithm.Params
			if rl.Algorithm.Name != got.Algorithm().String() {
				t.Fatalf("%s: name %q, params of %v", tc.key, rl.Algorithm.Name, got.Algorithm())
			}
		}
		if !reflect.DeepEqual(got, tc.params) {
			t.Fatalf("%s: params %#v, want %#v", tc.key, got, tc.params)
		}
	}
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, rateLimit string
		want            error
	}{
		{"policy with unit", "{policy: p, unit: second}", rlsconfig.ErrPolicy},
		{"policy with requests_per_unit", "{policy: p, requests_per_unit: 1}", rlsconfig.ErrPolicy},
		{"policy with unlimited", "{policy: p, unlimited: true}", rlsconfig.ErrPolicy},
		{"policy with algorithm", "{policy: p, algorithm: gcra}", rlsconfig.ErrPolicy},
		{"empty policy", "{policy: ''}", rlsconfig.ErrPolicy},
		{"unknown algorithm", "{algorithm: magic}", rlsconfig.ErrAlgorithm},
		{"leaky bucket", "{algorithm: leaky_bucket, unit: second, requests_per_unit: 1}", rlsconfig.ErrAlgorithm},
		{"missing field", "{algorithm: token_bucket, capacity: 1, refill: 1}", rlsconfig.ErrAlgorithm},
		{"foreign field", "{algorithm: gcra, rate: 1, period: 1s, burst: 1, capacity: 2}", rlsconfig.ErrAlgorithm},
		{"both forms", "{algorithm: sliding_log, limit: 1, window: 1s, unit: second}", rlsconfig.ErrAlgorithm},
		{"bad duration", "{algorithm: sliding_log, limit: 1, window: soon}", rlsconfig.ErrAlgorithm},
		{"negative field", "{algorithm: sliding_log, limit: -1, window: 1s}", rlsconfig.ErrAlgorithm},
		{"field without algorithm", "{unit: second, requests_per_unit: 1, capacity: 3}", rlsconfig.ErrAlgorithm},
		{"unlimited algorithm", "{algorithm: gcra, unlimited: true, rate: 1, period: 1s, burst: 1}", rlsconfig.ErrAlgorithm},
		{"fixed window without unit", "{algorithm: fixed_window}", rlsconfig.ErrInvalidUnit},
		{"invalid unit", "{unit: fortnight, requests_per_unit: 1}", rlsconfig.ErrInvalidUnit},
		{"unlimited with unit", "{unlimited: true, unit: day}", rlsconfig.ErrUnlimitedWithUnit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := "domain: dom\ndescriptors:\n  - key: k\n    value: v\n    rate_limit: " + tc.rateLimit + "\n"
			_, err := rlsconfig.Load([]rlsconfig.File{{Name: "f.yaml", Data: []byte(text)}})
			if !errors.Is(err, tc.want) || !errors.Is(err, rlsconfig.ErrInvalidConfig) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			var fe *rlsconfig.FileError
			if !errors.As(err, &fe) || fe.File != "f.yaml" || fe.Domain != "dom" || fe.Key != "dom.k_v" {
				t.Fatalf("error does not locate file, domain and key: %#v", fe)
			}
			if msg := err.Error(); !strings.Contains(msg, `file "f.yaml": domain "dom": key "dom.k_v"`) || strings.ToLower(msg[:1]) != msg[:1] {
				t.Fatalf("message: %s", msg)
			}
		})
	}
	// The extension keys are ours only inside rate_limit.
	_, err := rlsconfig.Load([]rlsconfig.File{{Name: "f.yaml", Data: []byte("domain: d\npolicy: p\n")}})
	if !errors.Is(err, rlsconfig.ErrUnknownKey) {
		t.Fatalf("policy at the root: %v", err)
	}
	// Several faults, several files: all reported.
	_, err = rlsconfig.Load([]rlsconfig.File{
		{Name: "a.yaml", Data: []byte("domain: d\ndescriptors: [{key: k, rate_limit: {unit: x}}, {key: k}]\n")},
		{Name: "b.yaml", Data: []byte("domain: d\n")},
	})
	for _, want := range []error{rlsconfig.ErrInvalidUnit, rlsconfig.ErrDuplicateKey, rlsconfig.ErrDuplicateDomain} {
		if !errors.Is(err, want) {
			t.Errorf("joined error lacks %v: %v", want, err)
		}
	}
}

func TestUnit(t *testing.T) {
	for s, want := range map[string]time.Duration{"second": time.Second, "MINUTE": time.Minute, "Hour": time.Hour,
		"day": 24 * time.Hour, "week": 7 * 24 * time.Hour, "month": 30 * 24 * time.Hour, "year": 365 * 24 * time.Hour} {
		u, err := rlsconfig.ParseUnit(s)
		if err != nil || u.Duration() != want || !strings.EqualFold(u.String(), s) {
			t.Errorf("%s: %v %v %v", s, u, u.Duration(), err)
		}
	}
	for _, s := range []string{"", "unknown", "seconds", "fortnight"} {
		if _, err := rlsconfig.ParseUnit(s); !errors.Is(err, rlsconfig.ErrInvalidUnit) {
			t.Errorf("%q: %v", s, err)
		}
	}
	var zero rlsconfig.Unit
	if zero.Valid() || zero.Duration() != 0 {
		t.Error("the zero Unit is valid")
	}
}

func TestLoadDir(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A ConfigMap mount: ..data -> ..stamp, b.yaml -> ..data/b.yaml.
	if err := os.Mkdir(filepath.Join(dir, "..2024_01"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "..2024_01", "b.yaml"), "domain: b\n")
	must(t, os.Symlink("..2024_01", filepath.Join(dir, "..data")))
	must(t, os.Symlink("..data/b.yaml", filepath.Join(dir, "b.yaml")))
	write(filepath.Join(dir, "a.yml"), "domain: a\n")
	write(filepath.Join(outside, "c.yaml"), "domain: c\n")
	must(t, os.Symlink(filepath.Join(outside, "c.yaml"), filepath.Join(dir, "c.yaml")))
	write(filepath.Join(dir, "README.md"), "not: [yaml")
	must(t, os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755))

	files, err := rlsconfig.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if !reflect.DeepEqual(names, []string{"a.yml", "b.yaml", "c.yaml"}) {
		t.Fatalf("files %v", names)
	}
	c, err := rlsconfig.LoadDir(dir)
	if err != nil || !reflect.DeepEqual(c.Domains(), []string{"a", "b", "c"}) {
		t.Fatalf("LoadDir: %v %v", err, c)
	}

	must(t, os.Symlink(filepath.Join(outside, "gone.yaml"), filepath.Join(dir, "dangling.yaml")))
	if _, err := rlsconfig.LoadDir(dir); !errors.Is(err, rlsconfig.ErrRead) || !strings.Contains(err.Error(), "dangling.yaml") {
		t.Fatalf("dangling link: %v", err)
	}
	if _, err := rlsconfig.LoadDir(filepath.Join(dir, "nope")); !errors.Is(err, rlsconfig.ErrRead) {
		t.Fatalf("missing dir: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentReads(t *testing.T) {
	c := mustLoad(t, matching)
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 200; i++ {
				_ = c.Lookup("d", es("user", "vip-x"))
				_ = c.Limits()
			}
		}()
	}
	for g := 0; g < 4; g++ {
		<-done
	}
}
