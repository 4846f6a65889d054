package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Families of measured limiters.
const (
	FamilyProvider  = "provider"   // this project's redisrate.Provider.Evaluate
	FamilyBare      = "bare"       // go-redis EvalSha of the same program
	FamilyRedisRate = "redis_rate" // github.com/go-redis/redis_rate/v10 Allow (GCRA)
	FamilyUlule     = "ulule"      // github.com/ulule/limiter/v3 + its go-redis v9 store
	FamilyTrivial   = "trivial"    // EvalSha of a trivial INCR+PEXPIRE script
	// FamilyPipelined is the Provider with pipelined program calls
	// (Options.PipelineMaxBatch benchPipelineBatch): token bucket, fixed
	// window and GCRA, the algorithms the issue-13 and issue-22 peer
	// targets name.
	FamilyPipelined = "provider_pipelined"
)

// benchPipelineBatch is the pipelined provider's PipelineMaxBatch.
const benchPipelineBatch = 16

// pipelinedName, pipelinedFixedName, pipelinedSlidingName and
// pipelinedGCRAName are the pipelined provider's limiters (token bucket,
// fixed window, sliding window counter, GCRA): the provider as it ships
// (APP_RATE_LIMIT_PIPELINE_MAX_BATCH defaults to 16), over the four
// algorithms of the matrix.
var (
	pipelinedName        = FamilyPipelined + "/" + ratelimit.AlgorithmTokenBucket.String()
	pipelinedFixedName   = FamilyPipelined + "/" + ratelimit.AlgorithmFixedWindow.String()
	pipelinedSlidingName = FamilyPipelined + "/" + ratelimit.AlgorithmSlidingWindowCounter.String()
	pipelinedGCRAName    = FamilyPipelined + "/" + ratelimit.AlgorithmGCRA.String()
)

// pipelinedNames are the pipelined provider's limiters, in matrix order.
var pipelinedNames = []string{pipelinedName, pipelinedFixedName, pipelinedSlidingName, pipelinedGCRAName}

// algorithms are the provider's algorithms of the throughput matrix and the
// memory phase, each beside a bare EvalSha of its program, in the order of
// policies.
var algorithms = []ratelimit.Algorithm{
	ratelimit.AlgorithmFixedWindow,
	ratelimit.AlgorithmSlidingWindowCounter,
	ratelimit.AlgorithmTokenBucket,
	ratelimit.AlgorithmGCRA,
}

// gcraName and slidingLogName name the provider's GCRA limiter (issue 22's
// peer of redis_rate) and its sliding-log limiter (the memory-under-abuse
// phase only).
var (
	gcraName       = providerName(ratelimit.AlgorithmGCRA.String())
	slidingLogName = providerName(ratelimit.AlgorithmSlidingLog.String())
	// setName is a policy set of the fixed-window and token-bucket
	// policies in one EvaluateSet (one set-program call: both keys share
	// the subject's slot, ADR 0026); twoCallsName is the same two
	// policies asked one Evaluate after the other (issue 23).
	setName      = FamilyProvider + "/set-of-2"
	twoCallsName = FamilyProvider + "/two-calls"
)

// Client settings shared by every measured limiter: the coordination
// client of redisrate.NewClient (retries off, one dial attempt, fixed
// timeouts), so every limiter talks to Redis through identical go-redis
// options.
const (
	benchPoolSize       = 64 // the highest concurrency measured
	benchCommandTimeout = 2 * time.Second
	benchDialTimeout    = time.Second
	benchPoolTimeout    = time.Second
	// benchLimit is far above what any run reaches, so every call takes the
	// admitting (writing) path of every limiter: the costlier path.
	benchLimit = 1_000_000_000
	// memLimit per hour is the realistic limit of the memory phase: it gives
	// stored numbers of realistic width, and a GCRA state (redis_rate's and
	// the provider's, both Rate = Burst = memLimit per hour) that lives 36 s
	// after one call instead of expiring within a second.
	memLimit = 100
	// abuseFactor is how many times its limit each subject of the
	// memory-under-abuse phase asks for: memLimit admitted, the rest denied.
	abuseFactor = 10
)

// trivialSource is the server-CPU baseline: the least a fixed-window
// limiter can do (INCR + PEXPIRE), with the same #!lua header as the
// programs.
const trivialSource = "#!lua\nlocal n = redis.call('INCR', KEYS[1])\nredis.call('PEXPIRE', KEYS[1], ARGV[1])\nreturn n\n"

// limiter is one measured subject: op performs one rate-limit decision for
// subject index i and fails when the decision is anything but "allowed".
type limiter struct {
	Name      string
	Family    string
	Algorithm string // wire name; the peers' own algorithm for redis_rate/ulule
	op        func(ctx context.Context, i int) error
	// memOp is op under the realistic limits of the memory phase (memLimit
	// per hour), nil for limiters the memory phase does not measure.
	memOp func(ctx context.Context, i int) error
	// abuseOp is one call for subject i under memLimit per hour that
	// reports whether it was admitted, for the memory-under-abuse phase;
	// nil for limiters that phase does not measure.
	abuseOp func(ctx context.Context, i int) (bool, error)
	close   func() error
}

// limiterSet holds every limiter of a run, keyed by name.
type limiterSet struct {
	all    []*limiter
	byName map[string]*limiter
}

func (s *limiterSet) add(l *limiter) {
	s.all = append(s.all, l)
	s.byName[l.Name] = l
}

// Close closes every limiter's client.
func (s *limiterSet) Close() error {
	var errs []error
	for _, l := range s.all {
		if err := l.close(); err != nil {
			errs = append(errs, fmt.Errorf("bench: close %s: %w", l.Name, err))
		}
	}
	return errors.Join(errs...)
}

// providerName and bareName name the per-algorithm limiters.
func providerName(alg string) string { return FamilyProvider + "/" + alg }
func bareName(alg string) string     { return FamilyBare + "/" + alg }

// newLimiters builds every measured limiter against addr, each over its own
// client with the options of clientConfig.
func newLimiters(ctx context.Context, addr string, subs subjects) (set *limiterSet, err error) {
	set = &limiterSet{byName: map[string]*limiter{}}
	defer func() {
		if err != nil {
			_ = set.Close()
		}
	}()
	cfg := clientConfig(addr)
	newClient := func() (*redis.Client, error) { return redisrate.NewClient(cfg) }
	pols, err := policies([4]ratelimit.PolicyID{"fw", "sw", "tb", "gc"}, benchLimit)
	if err != nil {
		return set, err
	}
	memPols, err := policies([4]ratelimit.PolicyID{"fh", "sh", "th", "gh"}, memLimit)
	if err != nil {
		return set, err
	}
	provPols := append(slices.Clone(pols), memPols...)
	logPol, logOK, err := slidingLogPolicy()
	if err != nil {
		return set, err
	}
	if logOK {
		provPols = append(provPols, logPol)
	}
	// A deadline no run reaches; computing one per call would add a clock
	// read to the provider only.
	deadline := time.Now().Add(30 * 24 * time.Hour)

	// This project's Provider, one over every policy.
	provKeys, err := keyBuilder("provider")
	if err != nil {
		return set, err
	}
	pc, err := newClient()
	if err != nil {
		return set, err
	}
	prov, err := redisrate.New(pc, provKeys, provPols, redisrate.Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
	if err != nil {
		_ = pc.Close()
		return set, fmt.Errorf("bench: provider: %w", err)
	}
	if err := prov.Start(ctx); err != nil {
		_ = prov.Close()
		return set, fmt.Errorf("bench: provider start: %w", err)
	}
	provClosed := false
	closeProv := func() error { // every provider limiter shares one provider
		if provClosed {
			return nil
		}
		provClosed = true
		return prov.Close()
	}
	evaluate := func(id ratelimit.PolicyID) func(ctx context.Context, i int) error {
		return func(ctx context.Context, i int) error {
			out := prov.Evaluate(ctx, ratelimit.Request{PolicyID: id, SubjectDigest: subs[i], Cost: 1, Deadline: deadline})
			if !ratelimit.Admitted(out) {
				return fmt.Errorf("provider %s: not admitted: %#v", id, out)
			}
			return nil
		}
	}
	for k, pol := range pols {
		alg := pol.Algorithm().String()
		set.add(&limiter{
			Name: providerName(alg), Family: FamilyProvider, Algorithm: alg,
			op:    evaluate(pol.ID()),
			memOp: evaluate(memPols[k].ID()),
			close: closeProv,
		})
	}
	// A policy set of two members beside the same two policies asked one
	// after the other: the set's cost against two single calls.
	setMembers := []ratelimit.PolicyID{pols[0].ID(), pols[2].ID()}
	set.add(&limiter{
		Name: setName, Family: FamilyProvider, Algorithm: "set",
		op: func(ctx context.Context, i int) error {
			out := prov.EvaluateSet(ctx, ratelimit.SetRequest{Members: setMembers, SubjectDigest: subs[i], Cost: 1, Deadline: deadline})
			if !ratelimit.Admitted(out) {
				return fmt.Errorf("provider set: not admitted: %#v", out)
			}
			return nil
		},
		close: closeProv,
	})
	first, second := evaluate(setMembers[0]), evaluate(setMembers[1])
	set.add(&limiter{
		Name: twoCallsName, Family: FamilyProvider, Algorithm: "two-calls",
		op: func(ctx context.Context, i int) error {
			if err := first(ctx, i); err != nil {
				return err
			}
			return second(ctx, i)
		},
		close: closeProv,
	})
	if logOK {
		id := logPol.ID()
		set.add(&limiter{
			Name: slidingLogName, Family: FamilyProvider, Algorithm: logPol.Algorithm().String(),
			abuseOp: func(ctx context.Context, i int) (bool, error) {
				out := prov.Evaluate(ctx, ratelimit.Request{PolicyID: id, SubjectDigest: subs[i], Cost: 1, Deadline: deadline})
				if e, ok := out.(ratelimit.Evaluated); ok {
					return e.Decision.Allowed, nil
				}
				return false, fmt.Errorf("provider %s: not evaluated: %#v", id, out)
			},
			close: closeProv,
		})
	}

	// The same Provider with pipelined program calls: token bucket, fixed
	// window, sliding window counter, GCRA.
	plKeys, err := keyBuilder("pipelined")
	if err != nil {
		return set, err
	}
	plc, err := newClient()
	if err != nil {
		return set, err
	}
	// In pipelinedNames' order: token bucket, fixed window, sliding
	// window counter, GCRA.
	plPols := []ratelimit.Policy{pols[2], pols[0], pols[1], pols[3]}
	pl, err := redisrate.New(plc, plKeys, plPols, redisrate.Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize, PipelineMaxBatch: benchPipelineBatch})
	if err != nil {
		_ = plc.Close()
		return set, fmt.Errorf("bench: pipelined provider: %w", err)
	}
	if err := pl.Start(ctx); err != nil {
		_ = pl.Close()
		return set, fmt.Errorf("bench: pipelined provider start: %w", err)
	}
	plClosed := false
	for i, name := range pipelinedNames {
		pol := plPols[i]
		if name != FamilyPipelined+"/"+pol.Algorithm().String() {
			return set, fmt.Errorf("bench: pipelined limiter %s given the %v policy", name, pol.Algorithm())
		}
		id := pol.ID()
		set.add(&limiter{
			Name: name, Family: FamilyPipelined, Algorithm: pol.Algorithm().String(),
			op: func(ctx context.Context, i int) error {
				out := pl.Evaluate(ctx, ratelimit.Request{PolicyID: id, SubjectDigest: subs[i], Cost: 1, Deadline: deadline})
				if !ratelimit.Admitted(out) {
					return fmt.Errorf("pipelined provider %s: not admitted: %#v", id, out)
				}
				return nil
			},
			close: func() error { // the four share one provider
				if plClosed {
					return nil
				}
				plClosed = true
				return pl.Close()
			},
		})
	}

	// The baselines and the peers it is compared with (baselines.go).
	if err := set.addBaselines(ctx, newClient, pols, subs); err != nil {
		return set, err
	}
	return set, nil
}
