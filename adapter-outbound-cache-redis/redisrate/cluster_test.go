package redisrate

// The cluster lane: a private Redis Cluster of 3 primaries + 3 replicas
// (redistest.StartCluster, loopback processes). Calls are counted with
// INFO commandstats summed over every node: replicas receive a script's
// effects, never the EVALSHA, so the sum is the program calls that ran.

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// clusterConfig is the client configuration of the cluster and sentinel
// tests. Their exact counts (calls = evaluations, Remaining after each step)
// need every call decided by its reply, so the command timeout leaves a
// loaded machine ample room: a dead node answers at once (connection
// refused or reset), so no test waits it out.
func clusterConfig() ClientConfig {
	return ClientConfig{
		Protocol:       ProtocolRESP2,
		CommandTimeout: clusterTimeout,
		DialTimeout:    clusterTimeout,
		PoolSize:       16,
		PoolTimeout:    time.Second,
	}
}

// clusterTimeout is the command and dial timeout of clusterConfig.
const clusterTimeout = 2 * time.Second

// clusterProvider builds and starts a Provider on the cluster at addrs.
func clusterProvider(t testing.TB, addrs []string, keys *keyspace.Builder, policies []ratelimit.Policy, mutate ...func(*ClientConfig)) *Provider {
	t.Helper()
	return clusterProviderAcks(t, addrs, keys, policies, 0, mutate...)
}

// clusterProviderAcks is clusterProvider with ReplicationAcks acks.
func clusterProviderAcks(t testing.TB, addrs []string, keys *keyspace.Builder, policies []ratelimit.Policy, acks int, mutate ...func(*ClientConfig)) *Provider {
	t.Helper()
	cfg := clusterConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	cc, err := NewClusterClient(cfg, addrs)
	require.NoError(t, err)
	opts := Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize, ReplicationAcks: acks}
	if acks > 0 {
		opts.ReplicationAckTimeout = cfg.CommandTimeout / 2
	}
	p, err := New(cc, keys, policies, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	return p
}

// programCalls is the program calls that ran over every node.
func programCalls(c *redistest.Cluster) int64 { return c.CommandCalls("evalsha", "eval") }

func TestClusterConformance(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	ratelimittest.Run(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		return clusterProvider(t, c.Addrs(), keys, policies)
	})
}

// TestClusterConformanceSets runs the set suite (RunSets) on the cluster (a
// subject's members share its slot: one set-program call).
func TestClusterConformanceSets(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	ratelimittest.RunSets(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		return clusterProvider(t, c.Addrs(), keys, policies)
	})
}

// TestClusterKeysOnEveryPrimary: subjects land on every primary, every
// decision is exactly the model's, and calls summed over all nodes equal
// the evaluations (each ran once, none twice); Start loaded the programs
// on every primary.
func TestClusterKeysOnEveryPrimary(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	policies := conformancePolicies(t, 1)
	p := clusterProvider(t, c.Addrs(), keys, policies)
	ctx := redistest.AdminCtx(t)
	for _, n := range c.Primaries() {
		for _, s := range p.scripts {
			ok, err := n.Client().ScriptExists(ctx, s.SHA()).Result()
			require.NoError(t, err)
			assert.Equal(t, []bool{true}, ok, "Start warmed %s up on %s", s.Name(), n.Addr())
		}
	}
	c.ResetStats()
	perPrimary := map[*redistest.Server]int{}
	evaluations := int64(0)
	for i := range 24 {
		s := randomSubject(t)
		pol := policies[i%len(policies)]
		key, err := StateKey(keys, pol, s)
		require.NoError(t, err)
		perPrimary[c.SlotOwner(redistest.Slot(key))]++
		for j := range 6 {
			out := ask(p, pol.ID(), s, 1)
			evaluations++
			e, ok := out.(ratelimit.Evaluated)
			require.Truef(t, ok, "%v", out)
			assert.Equal(t, j < 5, e.Decision.Allowed, "request %d of a limit of 5", j+1)
		}
	}
	assert.Len(t, perPrimary, 3, "keys on every primary")
	assert.Equal(t, evaluations, programCalls(c), "calls over every node = evaluations")
	assert.Zero(t, c.CommandCalls("eval"), "warm-up: no EVAL fallback")
}

// subjectInSlot returns a fresh subject whose state key under pol is in
// slot.
func subjectInSlot(t testing.TB, keys *keyspace.Builder, pol ratelimit.Policy, slot int) ratelimit.SubjectDigest {
	t.Helper()
	for range 1 << 20 {
		s := randomSubject(t)
		key, err := StateKey(keys, pol, s)
		require.NoError(t, err)
		if keySlot(key) == slot {
			return s
		}
	}
	t.Fatalf("no subject found in slot %d", slot)
	return ""
}

// TestClusterReshardingAskThenMoved moves one slot from primary A to B
// under the provider: while the slot is MIGRATING a new key is answered
// ASK (followed with ASKING on B), an existing key is served by A; after
// MIGRATE and SETSLOT NODE the old key is answered MOVED (followed, and the
// slot map updated). Every decision is Evaluated and exact, and calls
// summed over every node = evaluations: no program ran twice.
func TestClusterReshardingAskThenMoved(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	pol := fixedPolicy(t, "reshard", 5, time.Hour)
	p := clusterProvider(t, c.Addrs(), keys, []ratelimit.Policy{pol})
	ctx := redistest.AdminCtx(t)

	old := randomSubject(t)
	oldKey, err := StateKey(keys, pol, old)
	require.NoError(t, err)
	slot := keySlot(oldKey)
	a := c.SlotOwner(slot)
	var b *redistest.Server
	for _, n := range c.Primaries() {
		if n != a {
			b = n
			break
		}
	}
	fresh := subjectInSlot(t, keys, pol, slot)

	want := func(s ratelimit.SubjectDigest, allowed bool, remaining int64) {
		t.Helper()
		e, ok := ask(p, pol.ID(), s, 1).(ratelimit.Evaluated)
		require.True(t, ok)
		assert.Equal(t, allowed, e.Decision.Allowed)
		assert.Equal(t, remaining, e.Decision.Remaining)
	}
	c.ResetStats()
	want(old, true, 4)
	want(old, true, 3)

	// MIGRATING on A, IMPORTING on B.
	require.NoError(t, b.Client().Do(ctx, "cluster", "setslot", slot, "importing", c.ID(a)).Err())
	require.NoError(t, a.Client().Do(ctx, "cluster", "setslot", slot, "migrating", c.ID(b)).Err())
	want(old, true, 2)   // the key is still on A: A runs it
	want(fresh, true, 4) // not on A: ASK B, ASKING + EVALSHA on B
	want(fresh, true, 3)
	n, err := b.Client().ClusterCountKeysInSlot(ctx, slot).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the new key was created on B")
	n, err = a.Client().ClusterCountKeysInSlot(ctx, slot).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "A keeps only the old key")

	// MIGRATE the old key, then the slot belongs to B everywhere.
	host, port, _ := net.SplitHostPort(b.Addr())
	require.NoError(t, a.Client().Do(ctx, "migrate", host, port, oldKey, 0, 5000).Err())
	c.SetSlotNode(slot, b, a)
	want(old, true, 1) // MOVED B, followed
	want(old, true, 0) // straight to B
	want(old, false, 0)
	require.NotNil(t, p.router.SlotOwner(slot))
	assert.Equal(t, b.Addr(), p.router.SlotOwner(slot).Addr(), "the slot map follows MOVED")
	assert.EqualValues(t, 8, programCalls(c), "8 evaluations, 8 calls that ran over all nodes")

	assert.Positive(t, redistest.CommandStats(t, b.Client())["asking"].Calls, "ASKING was sent to B")
}

// TestClusterDownIsUnavailable: while a slot is unassigned the cluster
// answers CLUSTERDOWN before running anything; the provider follows it at
// most MaxClusterHops times, answers Unavailable{server_rejected}, and no
// call ran. Once the slot is back, the same provider evaluates.
func TestClusterDownIsUnavailable(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	pol := fixedPolicy(t, "down", 5, time.Hour)
	p := clusterProvider(t, c.Addrs(), keys, []ratelimit.Policy{pol})
	ctx := redistest.AdminCtx(t)
	s := randomSubject(t)
	key, err := StateKey(keys, pol, s)
	require.NoError(t, err)
	// Another slot than the key's: the whole cluster goes down.
	other := (keySlot(key) + 1) % redistest.ClusterSlots
	owner := c.SlotOwner(other)
	for _, n := range c.Nodes() {
		require.NoError(t, n.Client().Do(ctx, "cluster", "delslots", other).Err())
	}
	require.NoError(t, clusterState(ctx, c.SlotOwner(keySlot(key)), "fail"))

	c.ResetStats()
	out := ask(p, pol.ID(), s, 1)
	u, ok := out.(ratelimit.Unavailable)
	require.Truef(t, ok, "%v", out)
	assert.Equal(t, ratelimit.CategoryServerRejected, u.Category)
	assert.Zero(t, programCalls(c), "CLUSTERDOWN: nothing ran")

	require.NoError(t, owner.Client().Do(ctx, "cluster", "addslots", other).Err())
	c.WaitHealthy()
	e, ok := ask(p, pol.ID(), s, 1).(ratelimit.Evaluated)
	require.True(t, ok)
	assert.Equal(t, int64(4), e.Decision.Remaining)
	assert.EqualValues(t, 1, programCalls(c))
}

// TestClusterNewPrimaryAfterFailover: after CLUSTER FAILOVER the provider
// meets a primary it has never qualified: it checks the version and loads
// the programs there before the first call (no EVAL); a primary whose
// script cache is flushed gets exactly one EVAL fallback.
func TestClusterNewPrimaryAfterFailover(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	pol := fixedPolicy(t, "failover", 100, time.Hour)
	p := clusterProvider(t, c.Addrs(), keys, []ratelimit.Policy{pol})
	ctx := redistest.AdminCtx(t)
	s := randomSubject(t)
	key, err := StateKey(keys, pol, s)
	require.NoError(t, err)
	old := c.SlotOwner(keySlot(key))
	for i := range 3 {
		e, ok := ask(p, pol.ID(), s, 1).(ratelimit.Evaluated)
		require.True(t, ok)
		assert.Equal(t, int64(99-i), e.Decision.Remaining)
	}
	replica := c.ReplicasOf(old)[0]
	// Forget the scripts on the replica, so that only the provider's own
	// warm-up can load them (scripts do not follow replication).
	require.NoError(t, replica.Client().ScriptFlush(ctx).Err())
	c.Failover(replica)
	c.ResetStats()

	// The first call goes to the old primary (the provider's map is old):
	// MOVED to the replica, qualified, then EVALSHA there.
	var outs []ratelimit.Outcome
	for range 3 {
		outs = append(outs, ask(p, pol.ID(), s, 1))
	}
	for i, out := range outs {
		e, ok := out.(ratelimit.Evaluated)
		require.Truef(t, ok, "%v", out)
		assert.Equal(t, int64(96-i), e.Decision.Remaining, "the state replicated and continues")
	}
	assert.EqualValues(t, 3, programCalls(c))
	assert.Zero(t, c.CommandCalls("eval"), "the new primary was warmed up")

	// SCRIPT FLUSH on the serving primary: one NOSCRIPT, exactly one EVAL.
	require.NoError(t, replica.Client().ScriptFlush(ctx).Err())
	c.ResetStats()
	e, ok := ask(p, pol.ID(), s, 1).(ratelimit.Evaluated)
	require.True(t, ok)
	assert.Equal(t, int64(93), e.Decision.Remaining)
	assert.EqualValues(t, 1, c.CommandCalls("eval"), "exactly one EVAL")
}

// TestClusterConcurrentProvidersNeverAboveLimit: 4 providers x 64
// goroutines on 8 hot subjects spread over the primaries, no faults:
// every request is Evaluated and exactly limit requests per subject are
// admitted; calls over every node = requests. The timeouts (10 s) leave a
// loaded machine room to decide every call: the lane allows no failure.
func TestClusterConcurrentProvidersNeverAboveLimit(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	const limit, subjects, providers, workers, perWorker = 50, 8, 4, 64, 4
	pol := fixedPolicy(t, "hot", limit, time.Hour)
	var ps []*Provider
	for range providers {
		ps = append(ps, clusterProvider(t, c.Addrs(), keys, []ratelimit.Policy{pol}, func(c *ClientConfig) {
			c.PoolSize = workers // MaxInFlight = PoolSize: no admission refusals
			c.CommandTimeout, c.DialTimeout, c.PoolTimeout = noFaultTimeout, noFaultTimeout, noFaultTimeout
		}))
	}
	subs := make([]ratelimit.SubjectDigest, subjects)
	for i := range subs {
		subs[i] = randomSubject(t)
	}
	c.ResetStats()
	// 1024 requests, 128 per subject; no fault: every call is decided.
	admitted, other := hotSubjectLoad(t, ps, pol.ID(), subs, workers, perWorker)
	assertHotSubjectLimits(t, c, subs, admitted, other, limit, providers*workers*perWorker)
}

// noFaultTimeout is the command, dial and pool timeout of the cluster
// tests that inject no fault and count exactly: long enough that a loaded
// machine decides every call, so a failure is a defect, never noise.
const noFaultTimeout = 10 * time.Second

// fakeCluster is a one-node fake cluster: CLUSTER SLOTS maps every slot to
// itself, INFO and SCRIPT LOAD qualify it, and program calls are answered
// by program.
func fakeCluster(t *testing.T, program func(n int, args []string) respAction) *respServer {
	t.Helper()
	var mu sync.Mutex
	calls := 0
	var srv *respServer
	srv = startRESP(t, func(args []string) respAction {
		switch strings.ToLower(args[0]) {
		case "cluster":
			host, port, _ := net.SplitHostPort(srv.Addr())
			return respAction{reply: fmt.Sprintf("*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$%d\r\n%s\r\n:%s\r\n", len(host), host, port)}
		case "info":
			body := "redis_version:7.0.15\r\n"
			return respAction{reply: fmt.Sprintf("$%d\r\n%s\r\n", len(body), body)}
		case "script":
			sha := sha1Hex([]byte(args[2]))
			return respAction{reply: fmt.Sprintf("$40\r\n%s\r\n", sha)}
		case "evalsha", "eval":
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			return program(n, args)
		}
		return respAction{reply: "-ERR unexpected\r\n"}
	})
	return srv
}

func fakeClusterProvider(t *testing.T, srv *respServer, pol ratelimit.Policy) *Provider {
	t.Helper()
	cfg := clusterConfig()
	cc, err := NewClusterClient(cfg, []string{srv.Addr()})
	require.NoError(t, err)
	p, err := New(cc, testKeys(t), []ratelimit.Policy{pol}, Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	require.NoError(t, p.Start(redistest.AdminCtx(t)))
	return p
}

// TestClusterFollowsTryAgainAndClusterDown: TRYAGAIN and CLUSTERDOWN are
// refusals before anything ran, so the call is sent again (bounded), and
// its reply decides.
func TestClusterFollowsTryAgainAndClusterDown(t *testing.T) {
	pol := fixedPolicy(t, "api", 5, time.Minute)
	srv := fakeCluster(t, func(n int, args []string) respAction {
		switch n {
		case 1:
			return respAction{reply: "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"}
		case 2:
			return respAction{reply: "-CLUSTERDOWN The cluster is down\r\n"}
		}
		return respAction{reply: respInts(modelReplyInts(pol)...)}
	})
	p := fakeClusterProvider(t, srv, pol)
	out := ask(p, pol.ID(), subjectA, 1)
	assert.True(t, ratelimit.Admitted(out), "%v", out)
	assert.Equal(t, 3, srv.Count("evalsha"))
}

// TestClusterNeverResendsAfterWrite: a connection lost after the program
// was written is Indeterminate and the program is not sent again (go-redis's
// cluster loop would re-send it); a refusal that never ends stops after
// MaxClusterHops and is Unavailable.
func TestClusterNeverResendsAfterWrite(t *testing.T) {
	pol := fixedPolicy(t, "api", 5, time.Minute)
	srv := fakeCluster(t, func(int, []string) respAction { return respAction{close: true} })
	p := fakeClusterProvider(t, srv, pol)
	out := ask(p, pol.ID(), subjectA, 1)
	assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
	assert.Equal(t, 1, srv.Count("evalsha"), "never re-sent")

	srv2 := fakeCluster(t, func(int, []string) respAction { return respAction{reply: "-TRYAGAIN busy\r\n"} })
	p2 := fakeClusterProvider(t, srv2, pol)
	out = ask(p2, pol.ID(), subjectA, 1)
	u, ok := out.(ratelimit.Unavailable)
	require.Truef(t, ok, "%v", out)
	assert.Equal(t, ratelimit.CategoryServerRejected, u.Category)
	assert.Equal(t, MaxClusterHops, srv2.Count("evalsha"))
}

func modelReplyInts(p ratelimit.Policy) []int64 {
	var out []int64
	for _, v := range modelReply(p, time.Now(), 1) {
		out = append(out, v.(int64))
	}
	return out
}

// TestNewRefusesUnqualifiedClusterClients: a ClusterClient not built by
// NewClusterClient is refused, naming the option.
func TestNewRefusesUnqualifiedClusterClients(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	_, err := New(cc, testKeys(t), testPolicies(t), Options{CommandTimeout: testTimeout, MaxInFlight: 1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "MaxRedirects")
	assert.Contains(t, err.Error(), "MaxRetries")
}

// TestClusterFailoverUnderLoad: a primary fails over while two providers
// evaluate continuously (hour-long fixed window, a limit never reached, so
// the counter measures consumption). During the switch only Evaluated,
// Unavailable and Indeterminate outcomes occur; the same providers resume
// on the promoted replica; per subject the consumption the new primary
// holds is at most admitted + indeterminate (nothing applied twice) and,
// for the coordinated CLUSTER FAILOVER, at least the admitted (no
// acknowledged admission lost). For SIGKILL the lost acknowledged
// admissions (admitted − held, the over-admission a low limit would allow)
// are measured and logged.
func TestClusterFailoverUnderLoad(t *testing.T) {
	kill := func(c *redistest.Cluster, p *redistest.Server) { p.Kill(); c.WaitHealthy() }
	for _, tc := range []struct {
		name     string
		acks     int
		lossless bool // no acknowledged admission may be lost
		fault    func(c *redistest.Cluster, primary *redistest.Server)
	}{
		{"CLUSTER FAILOVER", 0, true, func(c *redistest.Cluster, p *redistest.Server) { c.Failover(c.ReplicasOf(p)[0]) }},
		{"SIGKILL primary", 0, false, kill},
		{"SIGKILL primary with REPLICATION_ACKS=1", 1, true, kill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redistest.StartCluster(t)
			keys := randomKeys(t)
			const limit = 1_000_000
			pol := fixedPolicy(t, "load", limit, time.Hour)
			ps := []*Provider{
				clusterProviderAcks(t, c.Addrs(), keys, []ratelimit.Policy{pol}, tc.acks),
				clusterProviderAcks(t, c.Addrs(), keys, []ratelimit.Policy{pol}, tc.acks),
			}
			victim := c.Primaries()[0]
			// Three subjects on the victim, three elsewhere.
			var subs []ratelimit.SubjectDigest
			onVictim := 0
			for len(subs) < 6 {
				s := randomSubject(t)
				key, err := StateKey(keys, pol, s)
				require.NoError(t, err)
				mine := c.SlotOwner(keySlot(key)) == victim
				if mine && onVictim < 3 || !mine && len(subs)-onVictim < 3 {
					subs = append(subs, s)
					if mine {
						onVictim++
					}
				}
			}
			tally, progress := failoverLoad(t, ps, pol.ID(), subs, 16)
			progress.waitAround(t, 20*time.Second, func() { tc.fault(c, victim) })
			progress.stop()

			if tc.acks > 0 {
				// The promoted replica has no replica of its own, so WAIT 1
				// fails there (every admission Indeterminate{replication})
				// until the killed node rejoins as its replica.
				victim.Restart()
				c.WaitHealthy()
				c.WaitReplicated()
			}
			var lostTotal, unavailable, indeterminate, shortfall int
			for i, s := range subs {
				tl := tally[s]
				unavailable += tl.unavailable
				indeterminate += tl.indeterminate
				shortfall += tl.shortfall
				// The same providers resume: a final evaluation is Evaluated
				// and its Remaining gives the consumption the new primary holds.
				// A slow acknowledgement or a timeout on a loaded machine:
				// counted as may-have-run and asked again, bounded in count
				// and time (the assertion is that the provider resumes, not
				// how fast).
				out := ask(ps[i%2], pol.ID(), s, 1)
				resumeBy := time.Now().Add(20 * time.Second)
				for range 200 {
					if out.Kind() == ratelimit.KindEvaluated || time.Now().After(resumeBy) {
						break
					}
					if out.Kind() == ratelimit.KindIndeterminate {
						tl.indeterminate++ // may have run
					}
					time.Sleep(100 * time.Millisecond)
					out = ask(ps[i%2], pol.ID(), s, 1)
				}
				e, ok := out.(ratelimit.Evaluated)
				require.Truef(t, ok, "provider resumed: %v", out)
				held := int(limit - 1 - e.Decision.Remaining)
				assert.Zero(t, tl.denied, "a limit never reached")
				assert.LessOrEqual(t, held, tl.admitted+tl.indeterminate, "nothing applied twice or out of thin air")
				if tc.lossless {
					assert.GreaterOrEqual(t, held, tl.admitted, "no acknowledged admission lost")
				}
				lostTotal += max(0, tl.admitted-held)
			}
			t.Logf("%s: %d subjects (3 on the failed primary); %d Unavailable, %d Indeterminate (%d of them replication) during the switch; acknowledged admissions lost (over-admission bound) %d",
				tc.name, len(subs), unavailable, indeterminate, shortfall, lostTotal)
		})
	}
}

// TestClusterReshardingUnderLoad moves the slot of four hot subjects from
// one primary to another while two providers evaluate continuously:
// MIGRATING/IMPORTING, MIGRATE of every key of the slot, SETSLOT NODE.
// Every decision is Evaluated (redirects are followed, not turned into
// failures), calls summed over every node equal the evaluations (zero
// programs applied twice), and each subject's consumption equals its
// admitted requests.
func TestClusterReshardingUnderLoad(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	const limit = 1_000_000
	pol := fixedPolicy(t, "reshard-load", limit, time.Hour)
	slow := func(c *ClientConfig) {
		c.CommandTimeout, c.DialTimeout, c.PoolTimeout = noFaultTimeout, noFaultTimeout, noFaultTimeout
	}
	ps := []*Provider{
		clusterProvider(t, c.Addrs(), keys, []ratelimit.Policy{pol}, slow),
		clusterProvider(t, c.Addrs(), keys, []ratelimit.Policy{pol}, slow),
	}
	first := randomSubject(t)
	firstKey, err := StateKey(keys, pol, first)
	require.NoError(t, err)
	slot := keySlot(firstKey)
	subs := []ratelimit.SubjectDigest{first}
	for len(subs) < 4 {
		subs = append(subs, subjectInSlot(t, keys, pol, slot))
	}
	a := c.SlotOwner(slot)
	var b *redistest.Server
	for _, n := range c.Primaries() {
		if n != a {
			b = n
			break
		}
	}
	ctx := redistest.AdminCtx(t)
	c.ResetStats()

	var mu sync.Mutex
	admitted := map[ratelimit.SubjectDigest]int{}
	evaluations, failures := 0, 0
	stop, loaded := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(loaded)
		redistest.Load(16, 5000, time.Millisecond, redistest.Closed(stop), func(w, i int) {
			s := subs[(w+i)%len(subs)]
			out := ask(ps[w%2], pol.ID(), s, 1)
			mu.Lock()
			switch {
			case ratelimit.Admitted(out):
				evaluations++
				admitted[s]++
			default:
				failures++
				t.Errorf("outcome %v (cause %v) during resharding: a redirect must be followed", out, causeOf(out))
			}
			mu.Unlock()
		})
	}()
	// Each step waits, bounded, for the state the next one needs instead
	// of sleeping: the load keeps running throughout (16 workers x 5000
	// calls, a pause of 1 ms: seconds of load; every wait below ends
	// within milliseconds of it).
	evaluated := func() int {
		mu.Lock()
		defer mu.Unlock()
		return evaluations
	}
	// progressed waits until the providers decided step more calls since
	// now, and until cond (nil: none) holds.
	progressed := func(what string, step int, cond func() bool) {
		t.Helper()
		from := evaluated()
		deadline := time.Now().Add(10 * time.Second)
		for evaluated() < from+step || (cond != nil && !cond()) {
			require.True(t, time.Now().Before(deadline), "waited 10s for %s", what)
			time.Sleep(2 * time.Millisecond)
		}
	}
	// Every subject's key exists on A before the slot starts moving.
	progressed("every subject admitted on A", 50, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(admitted) == len(subs)
	})
	require.NoError(t, b.Client().Do(ctx, "cluster", "setslot", slot, "importing", c.ID(a)).Err())
	require.NoError(t, a.Client().Do(ctx, "cluster", "setslot", slot, "migrating", c.ID(b)).Err())
	progressed("calls decided while the slot is MIGRATING", 50, nil)
	host, port, _ := net.SplitHostPort(b.Addr())
	for range 10 { // bounded: the slot holds at most the four keys
		ks, err := a.Client().ClusterGetKeysInSlot(ctx, slot, 10).Result()
		require.NoError(t, err)
		if len(ks) == 0 {
			break
		}
		for _, k := range ks {
			require.NoError(t, a.Client().Do(ctx, "migrate", host, port, k, 0, 5000).Err())
		}
	}
	// The keys are on B, the slot still A's: A answers ASK, followed
	// with ASKING on B.
	progressed("ASK followed to B", 50, func() bool {
		return redistest.CommandStats(t, b.Client())["asking"].Calls > 0
	})
	// The documented order (SetSlotNode: B, then A, then the rest). With A
	// first, A sends MOVED to B while B, still importing, sends MOVED back
	// to A until B learns it owns the slot: the redirect budget ran out and
	// the test failed about 1 run in 14.
	c.SetSlotNode(slot, b, a)
	// Both providers followed MOVED to B and decided more calls there.
	progressed("both providers' slot maps follow MOVED to B", 50, func() bool {
		for _, p := range ps {
			if o := p.router.SlotOwner(slot); o == nil || o.Addr() != b.Addr() {
				return false
			}
		}
		return true
	})
	close(stop)
	<-loaded

	require.Zero(t, failures, "calls not decided")
	assert.EqualValues(t, evaluations, programCalls(c), "calls over every node = evaluations")
	for _, s := range subs {
		key, err := StateKey(keys, pol, s)
		require.NoError(t, err)
		n, err := b.Client().Exists(ctx, key).Result()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "the key moved to B")
		e, ok := ask(ps[0], pol.ID(), s, 1).(ratelimit.Evaluated)
		require.True(t, ok)
		assert.Equal(t, admitted[s], int(limit-1-e.Decision.Remaining), "consumption = admitted")
	}
	refused := redistest.CommandStats(t, a.Client())["evalsha"]
	t.Logf("resharding under load: %d evaluations; ASKING on B: %d; refused (MOVED/ASK) EVALSHA on A: %d",
		evaluations, redistest.CommandStats(t, b.Client())["asking"].Calls, refused.RejectedCalls+refused.FailedCalls)
}
