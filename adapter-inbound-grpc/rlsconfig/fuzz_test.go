package rlsconfig_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
)

// FuzzLoad: Load never panics; it loads or refuses with ErrInvalidConfig,
// and what it loads answers Lookup for any entries.
func FuzzLoad(f *testing.F) {
	for _, dir := range []string{"testdata/envoy", "testdata/cases"} {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data, "key1", "value1")
		}
	}
	f.Add([]byte("domain: d\ndescriptors: [{key: k, value: 'a*b*', share_threshold: true, rate_limit: {algorithm: gcra, rate: 1, period: 1s, burst: 1}}]"), "k", "axxb")
	f.Fuzz(func(t *testing.T, data []byte, key, value string) {
		c, err := rlsconfig.Load([]rlsconfig.File{{Name: "f.yaml", Data: data}})
		if err != nil {
			if !errors.Is(err, rlsconfig.ErrInvalidConfig) {
				t.Fatalf("error without ErrInvalidConfig: %v", err)
			}
			return
		}
		for _, d := range c.Domains() {
			entries := []rlsconfig.Entry{{Key: key, Value: value}, {Key: value, Value: key}}
			for n := 0; n <= len(entries); n++ {
				m := c.Lookup(d, entries[:n])
				_ = m.CounterKey(d, entries[:n])
			}
		}
		for i, l := range c.Limits() {
			if l.ID != i {
				t.Fatalf("Limits()[%d].ID = %d", i, l.ID)
			}
		}
	})
}
