package programs

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

var updateDedupVectors = flag.Bool("update", false, "rewrite testdata/dedup-vectors-v2.json from the model")

const dedupVectorsFile = "testdata/dedup-vectors-v2.json"

// dedupVectorFile is testdata/dedup-vectors-v2.json: seeded step sequences
// of the dedup programs with the model's reply and dedup-hash size after
// every step, generated from EvaluateDedup (go test -run TestDedupVectors
// -update) and reviewed in diffs.
type dedupVectorFile struct {
	Format string            `json:"format"`
	Note   string            `json:"note"`
	Cases  []dedupVectorCase `json:"cases"`
}

type dedupVectorCase struct {
	Name string `json:"name"`
	// Policy is "fixed", "sliding" or "token" (smallPolicy with 1s
	// regression), with DedupWindowMillis; steps name policy "a" (ID
	// programs-test) or "b" (ID other-policy), sharing one dedup hash.
	Policy            string            `json:"policy"`
	DedupWindowMillis int64             `json:"dedupWindowMillis"`
	MaxReplays        int64             `json:"maxReplays"`
	MaxEntries        int               `json:"maxEntries"`
	Steps             []dedupVectorStep `json:"steps"`
}

type dedupVectorStep struct {
	ServerNowMillis int64    `json:"serverNowMillis"`
	Policy          string   `json:"policy"`
	Cost            int64    `json:"cost"`
	ID              string   `json:"id"`
	Reply           [7]int64 `json:"reply"`
	DedupLen        int      `json:"dedupLen"`
}

func (vc dedupVectorCase) policies(t testing.TB) map[string]ratelimit.Policy {
	alg := map[string]ratelimit.Algorithm{"fixed": ratelimit.AlgorithmFixedWindow, "sliding": ratelimit.AlgorithmSlidingWindowCounter, "token": ratelimit.AlgorithmTokenBucket}[vc.Policy]
	base := smallPolicy(t, alg, time.Second)
	w := time.Duration(vc.DedupWindowMillis) * time.Millisecond
	return map[string]ratelimit.Policy{"a": withDedupReplays(t, base, w, "", 0, vc.MaxReplays), "b": withDedupReplays(t, base, w, "other-policy", 0, vc.MaxReplays)}
}

// generateDedupVectors builds the cases from the model: per algorithm two
// windows and two caps, max replays 0, 1 or 3 in turn, 120 steps of random time steps (mostly small,
// sometimes past the window, sometimes backwards, within the tolerated
// regression or beyond it), costs 1..2, IDs from a pool of 8, policy b one step in five.
func generateDedupVectors(t testing.TB) dedupVectorFile {
	f := dedupVectorFile{Format: "dedup-vectors/v2", Note: "generated from programs.EvaluateDedup; every case starts from empty keys"}
	seed := uint64(1)
	replays := []int64{0, 1, 3}
	for _, alg := range []string{"fixed", "sliding", "token"} {
		for _, w := range []int64{250, 5000} {
			for _, maxEntries := range []int{3, DedupMaxEntries} {
				n := replays[seed%3]
				vc := dedupVectorCase{Name: fmt.Sprintf("%s window %dms cap %d replays %d", alg, w, maxEntries, n), Policy: alg, DedupWindowMillis: w, MaxReplays: n, MaxEntries: maxEntries}
				ps := vc.policies(t)
				rng := rand.New(rand.NewPCG(20261203, seed))
				seed++
				now := int64(1_764_000_000_000)
				var st = map[string]State{}
				var d Dedup
				for range 120 {
					switch k := rng.IntN(10); {
					case k < 6:
						now += rng.Int64N(40)
					case k < 9:
						now += rng.Int64N(2 * w)
					default:
						now -= rng.Int64N(2500)
					}
					which := "a"
					if rng.IntN(5) == 0 {
						which = "b"
					}
					cost := 1 + rng.Int64N(2)
					id := fmt.Sprintf("id-%d", rng.IntN(8))
					r, next, nd := evaluateDedup(ps[which], st[which], d, now, cost, id, maxEntries)
					st[which], d = next, nd
					vc.Steps = append(vc.Steps, dedupVectorStep{ServerNowMillis: now, Policy: which, Cost: cost, ID: id, Reply: r.Ints(), DedupLen: len(d)})
				}
				f.Cases = append(f.Cases, vc)
			}
		}
	}
	return f
}

// TestDedupVectors: the checked-in vectors are exactly what the model
// generates (go test -update rewrites them), and they cover every dedup
// status, the cap, a reuse charged after the replays are spent, and no
// replay where max replays is 0.
func TestDedupVectors(t *testing.T) {
	f := generateDedupVectors(t)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", " ")
	require.NoError(t, enc.Encode(f))
	if *updateDedupVectors {
		require.NoError(t, os.WriteFile(dedupVectorsFile, b.Bytes(), 0o644))
	}
	raw, err := os.ReadFile(dedupVectorsFile)
	require.NoError(t, err)
	require.Equal(t, string(raw), b.String(), "the model no longer reproduces %s (go test -run TestDedupVectors -update, then review the diff)", dedupVectorsFile)
	seen := map[Status]int{}
	capped := false
	charged := 0 // ALLOWED steps of an ID with a live record: a reuse charged after its replays
	for _, vc := range f.Cases {
		recorded := map[string]int64{} // ID -> server time of its record (cap 64: nothing is evicted)
		for _, s := range vc.Steps {
			seen[Status(s.Reply[0])]++
			capped = capped || (vc.MaxEntries == 3 && s.DedupLen == 3)
			if vc.MaxReplays == 0 {
				require.NotEqual(t, int64(StatusReplayed), s.Reply[0], "%s: no replay with max replays 0", vc.Name)
			}
			if vc.MaxEntries != DedupMaxEntries || s.Reply[0] != int64(StatusAllowed) {
				continue
			}
			if at, ok := recorded[s.ID]; ok && at+vc.DedupWindowMillis > s.ServerNowMillis {
				charged++
			} else {
				recorded[s.ID] = s.ServerNowMillis
			}
		}
	}
	require.Positive(t, charged, "no reuse charged within the window")
	for _, s := range []Status{StatusAllowed, StatusDenied, StatusClockUnsafe, StatusReplayed, StatusDedupConflict} {
		require.Positive(t, seen[s], "no %v step in the vectors: %v", s, seen)
	}
	require.True(t, capped)
}

// TestDedupProgramsReproduceVectors runs every dedup vector case through the
// real Lua dedup programs, generic and bound to the step's policy (ADR
// 0035, on twin keys), on miniredis with the clock set before each step
// and compares every reply field and the dedup hash's size.
func TestDedupProgramsReproduceVectors(t *testing.T) {
	raw, err := os.ReadFile(dedupVectorsFile)
	require.NoError(t, err)
	var f dedupVectorFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&f))
	require.Equal(t, "dedup-vectors/v2", f.Format)
	for n, vc := range f.Cases {
		t.Run(vc.Name, func(t *testing.T) {
			t.Parallel()
			m := newMini(t)
			ps := vc.policies(t)
			for i, step := range vc.Steps {
				p := ps[step.Policy]
				prog, ok := DedupFor(p.Algorithm())
				require.True(t, ok)
				bundle, err := ForPolicy(p)
				require.NoError(t, err)
				require.True(t, bundle.HasDedup)
				m.srv.SetTime(time.UnixMilli(step.ServerNowMillis))
				args := append(Args(p, step.Cost), DedupArgs(p, ratelimit.EvaluationID(step.ID))...)
				args[len(args)-1] = int64(vc.MaxEntries)
				boundArgs := append(BoundArgs(p, step.Cost), args[len(args)-ArgCountDedup:]...)
				// The generic program on its keys, the policy's bound one
				// (ForPolicy, ADR 0035) on twin keys: both answer the vector.
				for _, run := range []struct {
					prog   Program
					suffix string
					args   []any
				}{{prog, "", args}, {bundle.Dedup, ":bound", boundArgs}} {
					body := harness(false, 0, 0) + luaBody(t, run.prog.Source)
					keys := []string{fmt.Sprintf("v:%d:%s%s", n, step.Policy, run.suffix), fmt.Sprintf("v:%d:dedup%s", n, run.suffix)}
					v, err := evalInts(t.Context(), m.c, body, keys, run.args...)
					require.NoError(t, err, "step %d%s", i, run.suffix)
					require.Equal(t, step.Reply[:], v, "step %d%s at %d %s cost %d %s", i, run.suffix, step.ServerNowMillis, step.Policy, step.Cost, step.ID)
					size, err := m.c.HLen(t.Context(), keys[1]).Result()
					require.NoError(t, err)
					// SetTime does not expire keys in miniredis, so the hash
					// keeps expired records exactly as the model does.
					require.Equal(t, int64(step.DedupLen), size, "step %d%s: dedup hash size", i, run.suffix)
				}
				// The twins hold the same state, record and TTLs.
				state := fmt.Sprintf("v:%d:%s", n, step.Policy)
				require.Equal(t, getState(t, m.c, state), getState(t, m.c, state+":bound"), "step %d: stored value", i)
				require.Equal(t, m.srv.TTL(state), m.srv.TTL(state+":bound"), "step %d: TTL", i)
				dedup := fmt.Sprintf("v:%d:dedup", n)
				records, err := m.c.HGetAll(t.Context(), dedup).Result()
				require.NoError(t, err)
				boundRecords, err := m.c.HGetAll(t.Context(), dedup+":bound").Result()
				require.NoError(t, err)
				require.Equal(t, records, boundRecords, "step %d: dedup records", i)
				require.Equal(t, m.srv.TTL(dedup), m.srv.TTL(dedup+":bound"), "step %d: dedup TTL", i)
			}
		})
	}
}
