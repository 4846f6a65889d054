package main_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// leasedPolicies: ping admits 300 requests an hour per client, leased
// (ADR 0042): an instance may take a fifth of what is left at once.
const leasedPolicies = `{"policies": [
{"id": "global", "revision": 1, "algorithm": "fixed_window", "limit": 300, "window": "1h", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed", "routes": ["GET /api/v1/ping"],
 "lease": {"maxShare": 0.2, "ttl": "2s"}}]}`

// TestE2ELeasesKeepTheLimitAcrossInstances (issue 37 item 1), through the
// binary: three processes, a hot client, 4 workers each sending 120
// requests: exactly the limit of 300 is admitted across the three, most
// of them answered from leases without a round trip (counted by
// tlb_ratelimit_lease_units_total{event="local"}).
func TestE2ELeasesKeepTheLimitAcrossInstances(t *testing.T) {
	rs := redistest.Start(t)
	file := filepath.Join(t.TempDir(), "policies.json")
	require.NoError(t, os.WriteFile(file, []byte(leasedPolicies), 0o600))
	env := append(enabledEnv(t, rs.Addr()), "APP_RATE_LIMIT_POLICIES_FILE="+file)
	instances := []*instance{startInstance(t, env), startInstance(t, env), startInstance(t, env)}
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for _, in := range instances {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := &http.Client{}
				for range 120 {
					req, err := http.NewRequest(http.MethodGet, in.url("/api/v1/ping"), nil)
					if err != nil {
						panic(err)
					}
					req.Header.Set("X-Forwarded-For", "198.51.100.9")
					resp, err := client.Do(req)
					if err != nil {
						panic(err)
					}
					_ = resp.Body.Close()
					mu.Lock()
					statuses[resp.StatusCode]++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	assert.Equal(t, map[int]int{http.StatusOK: 300, http.StatusTooManyRequests: 3*4*120 - 300}, statuses)
	var local int
	re := regexp.MustCompile(`tlb_ratelimit_lease_units_total\{event="local",policy="global"\} (\d+)`)
	for _, in := range instances {
		if m := re.FindStringSubmatch(call(t, http.MethodGet, in.url("/metrics")).body); m != nil {
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			local += n
		}
	}
	t.Logf("%d of 300 admissions answered from leases", local)
	assert.Greater(t, local, 150, "most admissions come from leases")
}
