package envoyrls_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/tools/internal/envoyrls"
)

// diffDomain's fixed windows are one minute long: every pass runs inside
// one of them.
const (
	diffDomain = "diff"
	diffWindow = time.Minute
	// passBudget is the most one pass may take; AwaitWindow waits for a
	// fresh window when less remains.
	passBudget = 20 * time.Second
)

// diffYAML is the configuration both services load: a fixed window of 3
// per value, an unlimited key, and a limit (vip) that replaces another
// (category) when both match one request.
const diffYAML = `domain: diff
descriptors:
  - key: fixed
    rate_limit:
      unit: minute
      requests_per_unit: 3
  - key: free
    rate_limit:
      unlimited: true
  - key: category
    rate_limit:
      name: category
      unit: minute
      requests_per_unit: 2
  - key: vip
    rate_limit:
      unit: minute
      requests_per_unit: 5
      replaces:
        - name: category
`

// step is one request of a sequence. hits, when set, is every
// descriptor's own hits_addend, which client_cmd cannot send: such a step
// always goes through the Go client.
type step struct {
	name  string
	descs []envoyrls.Descriptor
	hits  *uint64
	want  []rlsv3.RateLimitResponse_Code // overall, then each descriptor
	// oursWant, when set, is our service's answer where docs/rls.md
	// ("What differs from envoyproxy/ratelimit") documents a difference;
	// why names it.
	oursWant []rlsv3.RateLimitResponse_Code
	why      string
}

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

func u64(v uint64) *uint64 { return &v }

// diffSequence is the script; run names its descriptor values, fresh per
// pass so that no pass sees another's counters.
func diffSequence(run string) []step {
	fixed := envoyrls.D("fixed", "f"+run)
	peek := envoyrls.D("fixed", "p"+run)
	fresh := envoyrls.D("fixed", "n"+run)
	free := envoyrls.D("free", "u"+run)
	cat := envoyrls.D("category", "c"+run)
	vip := envoyrls.D("vip", "c"+run)
	var s []step
	// Fixed window: 3 admitted, then denied (and, with the reference's
	// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, not counted).
	for i := 1; i <= 5; i++ {
		w := []rlsv3.RateLimitResponse_Code{ok, ok}
		if i > 3 {
			w = []rlsv3.RateLimitResponse_Code{over, over}
		}
		s = append(s, step{name: fmt.Sprintf("fixed #%d", i), descs: []envoyrls.Descriptor{fixed}, want: w})
	}
	// hits_addend 0 consumes nothing: three checks, then the whole limit.
	for i := 1; i <= 3; i++ {
		s = append(s, step{name: fmt.Sprintf("peek hits_addend=0 #%d", i), descs: []envoyrls.Descriptor{peek}, hits: u64(0), want: []rlsv3.RateLimitResponse_Code{ok, ok}})
	}
	for i := 1; i <= 4; i++ {
		w := []rlsv3.RateLimitResponse_Code{ok, ok}
		if i > 3 {
			w = []rlsv3.RateLimitResponse_Code{over, over}
		}
		s = append(s, step{name: fmt.Sprintf("peek hits_addend=1 #%d", i), descs: []envoyrls.Descriptor{peek}, hits: u64(1), want: w})
	}
	// One exhausted descriptor next to a fresh one: the request is denied
	// and the fresh one is not charged (the reference with
	// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT; ours one policy set, all or
	// nothing), so its whole limit is left; each reports its own code.
	s = append(s, step{name: "exhausted fixed + fresh fixed", descs: []envoyrls.Descriptor{fixed, fresh}, want: []rlsv3.RateLimitResponse_Code{over, over, ok}})
	for i := 1; i <= 4; i++ {
		w := []rlsv3.RateLimitResponse_Code{ok, ok}
		if i > 3 {
			w = []rlsv3.RateLimitResponse_Code{over, over}
		}
		s = append(s, step{name: fmt.Sprintf("fresh fixed alone #%d", i), descs: []envoyrls.Descriptor{fresh}, want: w})
	}
	// A check after the limit is spent is a denial on both sides.
	s = append(s, step{name: "peek hits_addend=0 after the limit", descs: []envoyrls.Descriptor{peek}, hits: u64(0), want: []rlsv3.RateLimitResponse_Code{over, over}})
	// Unlimited: never denied, also next to an exhausted limit it does
	// not change.
	for i := 1; i <= 5; i++ {
		s = append(s, step{name: fmt.Sprintf("free #%d", i), descs: []envoyrls.Descriptor{free}, want: []rlsv3.RateLimitResponse_Code{ok, ok}})
	}
	s = append(s, step{name: "free + exhausted fixed", descs: []envoyrls.Descriptor{free, fixed}, want: []rlsv3.RateLimitResponse_Code{over, ok, over}})
	// Replaces: with vip in the request, category's limit (2) is not
	// evaluated and not charged; vip's 5 hold.
	for i := 1; i <= 6; i++ {
		w := []rlsv3.RateLimitResponse_Code{ok, ok, ok}
		if i > 5 {
			w = []rlsv3.RateLimitResponse_Code{over, ok, over}
		}
		s = append(s, step{name: fmt.Sprintf("category + vip #%d", i), descs: []envoyrls.Descriptor{cat, vip}, want: w})
	}
	// category alone: nothing was charged to it above.
	for i := 1; i <= 3; i++ {
		w := []rlsv3.RateLimitResponse_Code{ok, ok}
		if i > 2 {
			w = []rlsv3.RateLimitResponse_Code{over, over}
		}
		s = append(s, step{name: fmt.Sprintf("category alone #%d", i), descs: []envoyrls.Descriptor{cat}, want: w})
	}
	return s
}

// target is one service under test.
type target struct {
	name string
	addr string
	grpc *envoyrls.Client
}

// send puts one step to a target: through client_cmd when viaCmd and the
// step has no hits_addend, else through the Go client.
func send(ctx context.Context, clientBin string, tg target, st step, viaCmd bool) (*rlsv3.RateLimitResponse, error) {
	if viaCmd && st.hits == nil {
		return envoyrls.RunClient(ctx, clientBin, tg.addr, diffDomain, st.descs...)
	}
	req := &rlsv3.RateLimitRequest{Domain: diffDomain}
	for _, d := range st.descs {
		req.Descriptors = append(req.Descriptors, d.Proto(st.hits))
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return tg.grpc.ShouldRateLimit(ctx, req)
}

func runID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// runPass sends the sequence to every target, step by step (each step to
// all targets before the next), inside one window; it retries once on
// fresh values when the pass crossed a window boundary.
func runPass(t *testing.T, clientBin string, targets []target, viaCmd bool) map[string][][]rlsv3.RateLimitResponse_Code {
	t.Helper()
	ctx := context.Background()
	for attempt := 1; attempt <= 2; attempt++ {
		require.NoError(t, envoyrls.AwaitWindow(ctx, diffWindow, passBudget))
		startWindow := time.Now().UnixMilli() / diffWindow.Milliseconds()
		seq := diffSequence(runID())
		got := map[string][][]rlsv3.RateLimitResponse_Code{}
		for _, st := range seq {
			for _, tg := range targets {
				resp, err := send(ctx, clientBin, tg, st, viaCmd)
				require.NoError(t, err, "%s: %s", tg.name, st.name)
				got[tg.name] = append(got[tg.name], envoyrls.Codes(resp))
			}
		}
		if time.Now().UnixMilli()/diffWindow.Milliseconds() == startWindow {
			return got
		}
		t.Logf("pass crossed a window boundary (attempt %d); again on fresh values", attempt)
	}
	t.Fatalf("two passes crossed a window boundary: the machine is too slow for a %v budget", passBudget)
	return nil
}

// checkPass compares every target's codes with the script, step by step:
// the reference's with want, ours with want too unless the step names a
// documented difference (oursWant, logged with its reason).
func checkPass(t *testing.T, pass string, targets []target, got map[string][][]rlsv3.RateLimitResponse_Code) {
	t.Helper()
	seq := diffSequence("")
	for _, tg := range targets {
		require.Len(t, got[tg.name], len(seq), "%s %s", pass, tg.name)
		for i, st := range seq {
			want := st.want
			if tg.name == "ours" && st.oursWant != nil {
				want = st.oursWant
				t.Logf("%s: step %q: ours %v where the reference says %v, as documented: %s", pass, st.name, st.oursWant, st.want, st.why)
			}
			require.Equal(t, want, got[tg.name][i], "%s: %s, step %q: codes (overall, then each descriptor)", pass, tg.name, st.name)
		}
	}
}

// TestDifferentialFixedWindow puts one sequence of requests to the
// reference (envoyproxy/ratelimit's service_cmd with
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true) and to our service, both
// loading diffYAML, each on its own private redis-server: once through the
// reference's client_cmd, once through a Go gRPC client. The
// OK/OVER_LIMIT codes must be the script's, equal between the two except
// where docs/rls.md documents a difference (each such step says which).
func TestDifferentialFixedWindow(t *testing.T) {
	root, bins := needBinaries(t)
	configs := map[string]string{"diff.yaml": diffYAML}

	refRedis := startRedis(t)
	ref, err := envoyrls.StartReference(context.Background(), envoyrls.ReferenceConfig{
		Bin: bins.Service, RedisAddr: refRedis.Addr, Configs: configs, StopIncrementWhenOverLimit: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service_cmd log:\n%s", ref.LogTail())
		}
		_ = ref.Close()
	})
	refClient, err := envoyrls.Dial(ref.GRPCAddr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = refClient.Close() })
	targets := []target{{name: "reference", addr: ref.GRPCAddr, grpc: refClient}}

	// The reference alone must follow the script first: a failure here is
	// the script's (or the reference's), not ours.
	t.Run("reference", func(t *testing.T) {
		checkPass(t, "reference via client_cmd", targets, runPass(t, bins.Client, targets, true))
	})
	if t.Failed() {
		return
	}

	ours := startOurs(t, root, configs)
	ourClient, err := envoyrls.Dial(ours.GRPCAddr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ourClient.Close() })
	targets = append(targets, target{name: "ours", addr: ours.GRPCAddr, grpc: ourClient})

	t.Run("client_cmd", func(t *testing.T) {
		checkPass(t, "via client_cmd", targets, runPass(t, bins.Client, targets, true))
	})
	t.Run("go client", func(t *testing.T) {
		checkPass(t, "via the Go client", targets, runPass(t, bins.Client, targets, false))
	})
}
