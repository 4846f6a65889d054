package rlsconfig_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
)

// The reference's answers (testdata/reference.json) were produced by
// envoyproxy/ratelimit's own loader and GetLimit at the commit named in
// testdata/envoy/NOTICE, over the cases of testdata/cases.json (the
// reference's test/config files, byte-identical under testdata/envoy, and
// ours under testdata/cases) and the descriptors of testdata/queries.json
// (every descriptor config_test.go queries, plus ours), asked in every
// domain. A match absent from reference.json is a nil limit there.

type refCase struct {
	Name    string   `json:"name"`
	Files   []string `json:"files"`
	Domains []string `json:"domains"`
}

type refLimit struct {
	RequestsPerUnit uint32         `json:"requests_per_unit"`
	Unit            string         `json:"unit"`
	Unlimited       bool           `json:"unlimited"`
	ShadowMode      bool           `json:"shadow_mode"`
	QuotaMode       bool           `json:"quota_mode"`
	Name            string         `json:"name"`
	Replaces        []string       `json:"replaces"`
	DetailedMetric  bool           `json:"detailed_metric"`
	FullKey         string         `json:"full_key"`
	StatsKey        string         `json:"stats_key"`
	Share           []string       `json:"share_threshold_key_pattern"`
	Metadata        map[string]any `json:"metadata"`
}

type refMatch struct {
	Domain  string      `json:"domain"`
	Entries [][2]string `json:"entries"`
	Limit   *refLimit   `json:"limit"`
}

type refOut struct {
	Name    string     `json:"name"`
	Refused bool       `json:"refused"`
	Error   string     `json:"error"`
	Matches []refMatch `json:"matches"`
}

// refusalSentinel is the sentinel our error must carry for each refused
// case (the reference's message in reference.json says the same).
var refusalSentinel = map[string]error{
	"bad_limit_unit.yaml":                 rlsconfig.ErrInvalidUnit,
	"bad_yaml.yaml":                       rlsconfig.ErrYAML,
	"duplicate_key.yaml":                  rlsconfig.ErrDuplicateKey,
	"empty_domain.yaml":                   rlsconfig.ErrEmptyDomain,
	"empty_key.yaml":                      rlsconfig.ErrEmptyKey,
	"misspelled_key.yaml":                 rlsconfig.ErrUnknownKey,
	"misspelled_key2.yaml":                rlsconfig.ErrUnknownKey,
	"non_map_list.yaml":                   rlsconfig.ErrBadValue,
	"non_string_key.yaml":                 rlsconfig.ErrUnknownKey,
	"replaces_empty.yaml":                 rlsconfig.ErrReplaces,
	"replaces_self.yaml":                  rlsconfig.ErrReplaces,
	"unlimited_with_unit.yaml":            rlsconfig.ErrUnlimitedWithUnit,
	"basic+duplicate_domain":              rlsconfig.ErrDuplicateDomain,
	"merge_domain_key1+merge_domain_key2": rlsconfig.ErrDuplicateDomain,
	"merge_domain_key1+merge_domain_key1": rlsconfig.ErrDuplicateDomain,
	"cases/anchors.yaml":                  rlsconfig.ErrUnknownKey,
	"cases/bool_string.yaml":              rlsconfig.ErrYAML,
	"cases/composite_collision.yaml":      rlsconfig.ErrDuplicateKey,
	"cases/descriptors_map.yaml":          rlsconfig.ErrYAML,
	"cases/empty_file.yaml":               rlsconfig.ErrEmptyDomain,
	"cases/empty_key_with_value.yaml":     rlsconfig.ErrEmptyKey,
	"cases/float_value.yaml":              rlsconfig.ErrBadValue,
	"cases/rpu_negative.yaml":             rlsconfig.ErrYAML,
	"cases/rpu_overflow.yaml":             rlsconfig.ErrYAML,
	"cases/share_no_wildcard.yaml":        rlsconfig.ErrShareThreshold,
	"cases/top_level_list.yaml":           rlsconfig.ErrYAML,
	"cases/unit_missing.yaml":             rlsconfig.ErrInvalidUnit,
	"cases/unit_unknown.yaml":             rlsconfig.ErrInvalidUnit,
	"cases/yaml11_bool_key.yaml":          rlsconfig.ErrUnknownKey,
	"basic_config+wildcard (same domain)": rlsconfig.ErrDuplicateDomain,
}

// keyLevel lists the sentinels of faults inside a descriptor or a key: the
// error must name the key.
var keyLevel = []error{
	rlsconfig.ErrInvalidUnit, rlsconfig.ErrDuplicateKey, rlsconfig.ErrEmptyKey, rlsconfig.ErrUnknownKey,
	rlsconfig.ErrBadValue, rlsconfig.ErrReplaces, rlsconfig.ErrUnlimitedWithUnit, rlsconfig.ErrShareThreshold,
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestReferenceFiles(t *testing.T) {
	var cases []refCase
	var queries [][][2]string
	var want []refOut
	readJSON(t, "cases.json", &cases)
	readJSON(t, "queries.json", &queries)
	readJSON(t, "reference.json", &want)
	if len(cases) != len(want) {
		t.Fatalf("%d cases, %d reference answers: regenerate reference.json", len(cases), len(want))
	}
	// Every reference test file is a case.
	envoyFiles, _ := filepath.Glob("testdata/envoy/*.yaml")
	covered := map[string]bool{}
	for _, c := range cases {
		for _, f := range c.Files {
			covered[filepath.Join("testdata", f)] = true
		}
	}
	for _, f := range envoyFiles {
		if !covered[f] {
			t.Errorf("%s is in no case", f)
		}
	}

	for i, c := range cases {
		ref := want[i]
		t.Run(c.Name, func(t *testing.T) {
			var files []rlsconfig.File
			for _, f := range c.Files {
				data, err := os.ReadFile(filepath.Join("testdata", f))
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, rlsconfig.File{Name: f, Data: data})
			}
			cfg, err := rlsconfig.Load(files)
			if ref.Refused {
				checkRefusal(t, c.Name, ref.Error, err)
				return
			}
			if err != nil {
				t.Fatalf("the reference loads it, we refuse: %v", err)
			}
			got := map[string]*refMatch{}
			for _, m := range ref.Matches {
				got[matchKey(m.Domain, m.Entries)] = &m
			}
			n := 0
			for _, d := range c.Domains {
				for _, q := range queries {
					entries := make([]rlsconfig.Entry, len(q))
					for j, e := range q {
						entries[j] = rlsconfig.Entry{Key: e[0], Value: e[1]}
					}
					exp := got[matchKey(d, q)]
					m := cfg.Lookup(d, entries)
					if rl := cfg.Match(d, entries); rl != m.Limit {
						t.Errorf("%s %v: Match %p is not Lookup's limit %p", d, q, rl, m.Limit)
					}
					if exp == nil {
						if m.Limit != nil {
							t.Errorf("%s %v: reference has no limit, we match %+v", d, q, m.Limit)
						}
						continue
					}
					n++
					compareLimit(t, d, q, exp.Limit, m, cfg)
				}
			}
			if n != len(ref.Matches) {
				t.Errorf("compared %d matches, the reference has %d", n, len(ref.Matches))
			}
		})
	}
}

func matchKey(domain string, entries [][2]string) string {
	b, _ := json.Marshal(entries)
	return domain + "\x00" + string(b)
}

func checkRefusal(t *testing.T, name, refErr string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("the reference refuses it (%s), we load it", refErr)
	}
	if !errors.Is(err, rlsconfig.ErrInvalidConfig) {
		t.Errorf("error does not wrap ErrInvalidConfig: %v", err)
	}
	sentinel := refusalSentinel[name]
	if sentinel == nil {
		t.Fatalf("no expected sentinel for %s; we say: %v", name, err)
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("error %v does not wrap %v (reference: %s)", err, sentinel, refErr)
	}
	// The reference blames "file: ..."; we must name the same file.
	blamed, _, _ := strings.Cut(refErr, ": ")
	var fe *rlsconfig.FileError
	if !errors.As(err, &fe) {
		t.Fatalf("error is not a *FileError: %v", err)
	}
	if fe.File != blamed {
		t.Errorf("we blame file %q, the reference %q", fe.File, blamed)
	}
	if !strings.Contains(err.Error(), blamed) {
		t.Errorf("message does not name the file %q: %v", blamed, err)
	}
	if data, _ := os.ReadFile(filepath.Join("testdata", blamed)); strings.Contains(string(data), "\ndomain: ") || strings.HasPrefix(string(data), "domain: ") {
		if fe.Domain == "" && !errors.Is(err, rlsconfig.ErrYAML) {
			t.Errorf("the file has a domain, the error names none: %v", err)
		}
	}
	for _, s := range keyLevel {
		if errors.Is(err, s) && fe.Key == "" {
			t.Errorf("a %v error must name the key: %v", s, err)
		}
	}
	if msg := err.Error(); msg != strings.ToLower(msg[:1])+msg[1:] {
		t.Errorf("message not lowercase: %v", msg)
	}
}

func compareLimit(t *testing.T, d string, q [][2]string, exp *refLimit, m rlsconfig.Matched, cfg *rlsconfig.Config) {
	t.Helper()
	rl := m.Limit
	if rl == nil {
		t.Errorf("%s %v: the reference gives %+v, we match nothing", d, q, exp)
		return
	}
	unit := "UNKNOWN"
	if rl.Unit != 0 {
		unit = strings.ToUpper(rl.Unit.String())
	}
	got := refLimit{
		RequestsPerUnit: rl.RequestsPerUnit, Unit: unit, Unlimited: rl.Unlimited, ShadowMode: rl.ShadowMode,
		QuotaMode: rl.QuotaMode, Name: rl.Name, Replaces: rl.Replaces, DetailedMetric: rl.DetailedMetric,
		FullKey: m.StatsKey, StatsKey: m.StatsKey, Share: m.ShareThresholdKeyPattern,
	}
	if len(got.Replaces) == 0 {
		got.Replaces = nil
	}
	if m.Metadata != nil {
		got.Metadata = m.Metadata.AsMap()
	}
	// Round-trip ours through JSON so numbers compare as the reference's.
	b, _ := json.Marshal(got)
	var gotJ refLimit
	_ = json.Unmarshal(b, &gotJ)
	if !reflect.DeepEqual(&gotJ, exp) {
		t.Errorf("%s %v:\n got  %+v\n want %+v", d, q, gotJ, *exp)
	}
	if lim := cfg.Limits(); rl.ID < 0 || rl.ID >= len(lim) || lim[rl.ID] != rl {
		t.Errorf("%s %v: the limit is not Limits()[%d]", d, q, rl.ID)
	}
}
