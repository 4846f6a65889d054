package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rateplan"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// planPolicies has the tiers: api is decided by api-free (5) on
// free, the default plan, and by api-gold (50) on gold; login is decided
// by itself on free and by login-gold on gold. Token buckets refilling one
// token an hour, so no state moves while a test runs.
const planPolicies = `{"policies": [
  {"id": "api", "revision": 1, "algorithm": "token_bucket", "capacity": 100, "refillTokens": 1, "refillPeriod": "1h",
   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed", "routes": ["GET /api/"]},
  {"id": "api-free", "revision": 1, "algorithm": "token_bucket", "capacity": 5, "refillTokens": 1, "refillPeriod": "1h",
   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed"},
  {"id": "api-gold", "revision": 1, "algorithm": "token_bucket", "capacity": 50, "refillTokens": 1, "refillPeriod": "1h",
   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed"},
  {"id": "login", "revision": 1, "algorithm": "token_bucket", "capacity": 5, "refillTokens": 1, "refillPeriod": "1h",
   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed", "routes": ["POST /api/v1/login"]},
  {"id": "login-gold", "revision": 1, "algorithm": "token_bucket", "capacity": 20, "refillTokens": 1, "refillPeriod": "1h",
   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed"}
],
"plans": [
  {"id": "free", "policies": {"api": "api-free"}},
  {"id": "gold", "policies": {"api": "api-gold", "login": "login-gold"}}
],
"defaultPlan": "free"}`

// planSetup is setup with planPolicies as the policy file.
func planSetup(t *testing.T) (*redistest.Server, map[string]string) {
	t.Helper()
	rs, env := setup(t)
	p := filepath.Join(t.TempDir(), "plans.json")
	require.NoError(t, os.WriteFile(p, []byte(planPolicies), 0o600))
	env["APP_RATE_LIMIT_POLICIES_FILE"] = p
	return rs, env
}

// assignmentKey is the key a plan get output names.
func assignmentKey(t *testing.T, stdout string) string {
	t.Helper()
	k := keyOf(stdout)
	require.True(t, strings.HasPrefix(k, "tlb:rate:plan:plan:"), "assignment key %q", k)
	return k
}

// TestPlanSetGetUnset: get before any assignment shows the default plan;
// set without --yes says what would change and changes nothing; set --yes
// stores the plan, prints the moves, publishes and writes the audit line
// (to stderr and --audit-log, no subject in it); get shows it; unset is
// the same way back; a set or unset that would change nothing says so.
func TestPlanSetGetUnset(t *testing.T) {
	rs, env := planSetup(t)
	kf := keyFile(t, testAPIKey)
	auditLog := filepath.Join(t.TempDir(), "audit.log")

	before := tlbctl(t, environ(env), "plan", "get", "--api-key-file", kf)
	require.Equal(t, exitOK, before.code, before.stderr)
	assert.Empty(t, before.stderr)
	assert.Contains(t, before.stdout, "subject     api-key sha256 "+subject.DigestAPIKey(testAPIKey).String())
	assert.NotContains(t, before.stdout, testAPIKey)
	assert.Contains(t, before.stdout, "stored      none (no assignment)")
	assert.Contains(t, before.stdout, "effective   free (the default plan)")
	assert.Contains(t, before.stdout, "base        api decided by api-free")
	assert.Contains(t, before.stdout, "base        login decided by login")
	akey := assignmentKey(t, before.stdout)

	dry := tlbctl(t, environ(env), "plan", "set", "--plan", "gold", "--api-key-file", kf, "--audit-log", auditLog)
	require.Equal(t, exitOK, dry.code, dry.stderr)
	assert.Contains(t, dry.stdout, "would set the plan of api-key sha256 "+subject.DigestAPIKey(testAPIKey).String()+" to gold (stored now: none; effective free -> gold): key "+akey)
	assert.Contains(t, dry.stdout, "would move  base api: api-free -> api-gold, consumed now 0 of 5, would carry 0 of 50")
	assert.Contains(t, dry.stdout, "would move  base login: login -> login-gold, consumed now 0 of 5, would carry 0 of 20")
	assert.Contains(t, dry.stdout, "run again with --yes to set it")
	assert.Empty(t, dry.stderr, "no audit line without --yes")
	n, err := rs.Client().Exists(ctxT(t), akey).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "without --yes nothing is stored")
	_, err = os.Stat(auditLog)
	assert.True(t, os.IsNotExist(err), "without --yes the audit log is not even opened")

	set := tlbctl(t, environ(env), "plan", "set", "--plan", "gold", "--api-key-file", kf, "--yes", "--audit-log", auditLog)
	require.Equal(t, exitOK, set.code, set.stderr)
	assert.Contains(t, set.stdout, "set the plan of api-key sha256 "+subject.DigestAPIKey(testAPIKey).String()+" to gold (was stored: none; effective free -> gold): key "+akey)
	assert.Contains(t, set.stdout, "moved       base api: api-free -> api-gold, consumed 0, carried 0")
	assert.Contains(t, set.stdout, "moved       base login: login -> login-gold, consumed 0, carried 0")
	assert.Contains(t, set.stdout, "invalidation published on "+ratedenial.Channel+": 0 subscribed instance connection(s) received it")
	plan, err := rs.Client().HGet(ctxT(t), akey, rateplan.FieldPlan).Result()
	require.NoError(t, err)
	assert.Equal(t, "gold", plan)

	b, err := os.ReadFile(auditLog)
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(set.stderr), strings.TrimSpace(string(b)), "the line on stderr is the line in the file")
	assert.Regexp(t, `^\{"time":"[^"]+","level":"INFO","msg":"tlbctl plan set","subject_kind":"api-key","subject_digest":"[A-Za-z0-9_-]{22,}","key":"`+regexp.QuoteMeta(akey)+`","stored_before":"none","stored_after":"gold","plan_from":"free","plan_to":"gold","moves":\[\{"base":"api","from":"api-free","to":"api-gold","consumed":0,"carried":0\},\{"base":"login","from":"login","to":"login-gold","consumed":0,"carried":0\}\],"redis_user":"tlb-ctl","redis":"127\.0\.0\.1:\d+","pid":\d+,"os_user":"[^"]+"\}$`, strings.TrimSpace(string(b)))
	assert.NotContains(t, string(b), testAPIKey, "the audit line holds no subject")
	assert.NotContains(t, string(b), "pass", "nor a password")

	after := tlbctl(t, environ(env), "plan", "get", "--api-key-file", kf)
	require.Equal(t, exitOK, after.code, after.stderr)
	assert.Regexp(t, `stored      gold \(set at \d{4}-\d\d-\d\dT[^)]+Z\)`, after.stdout)
	assert.Contains(t, after.stdout, "effective   gold\n")
	assert.Contains(t, after.stdout, "base        api decided by api-gold")
	assert.Contains(t, after.stdout, "base        login decided by login-gold")

	again := tlbctl(t, environ(env), "plan", "set", "--plan", "gold", "--api-key-file", kf, "--yes", "--audit-log", auditLog)
	require.Equal(t, exitOK, again.code, again.stderr)
	assert.Contains(t, again.stdout, "nothing to change: the plan of api-key sha256 "+subject.DigestAPIKey(testAPIKey).String()+" is already gold")
	assert.Empty(t, again.stderr)

	dryUnset := tlbctl(t, environ(env), "plan", "unset", "--api-key-file", kf)
	require.Equal(t, exitOK, dryUnset.code, dryUnset.stderr)
	assert.Contains(t, dryUnset.stdout, "would unset the plan of api-key sha256 "+subject.DigestAPIKey(testAPIKey).String()+" (stored now: gold; effective gold -> free, the default plan)")
	assert.Contains(t, dryUnset.stdout, "run again with --yes to unset it")
	plan, err = rs.Client().HGet(ctxT(t), akey, rateplan.FieldPlan).Result()
	require.NoError(t, err)
	assert.Equal(t, "gold", plan, "without --yes nothing is removed")

	unset := tlbctl(t, environ(env), "plan", "unset", "--api-key-file", kf, "--yes", "--audit-log", auditLog)
	require.Equal(t, exitOK, unset.code, unset.stderr)
	assert.Contains(t, unset.stdout, "unset the plan of api-key sha256 "+subject.DigestAPIKey(testAPIKey).String()+" (was stored: gold; effective gold -> free, the default plan)")
	assert.Contains(t, unset.stdout, "moved       base api: api-gold -> api-free, consumed 0, carried 0")
	n, err = rs.Client().Exists(ctxT(t), akey).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
	b, err = os.ReadFile(auditLog)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 2, "appended, not overwritten")
	assert.Contains(t, lines[1], `"msg":"tlbctl plan unset"`)
	assert.Contains(t, lines[1], `"stored_before":"gold","stored_after":"none","plan_from":"gold","plan_to":"free"`)

	gone := tlbctl(t, environ(env), "plan", "get", "--api-key-file", kf)
	assert.Contains(t, gone.stdout, "stored      none (no assignment)")
	nothing := tlbctl(t, environ(env), "plan", "unset", "--api-key-file", kf, "--yes")
	require.Equal(t, exitOK, nothing.code, nothing.stderr)
	assert.Contains(t, nothing.stdout, "nothing to unset: api-key sha256 "+subject.DigestAPIKey(testAPIKey).String()+" has no assignment, it is on the default plan free")
	assert.Empty(t, nothing.stderr)
}

// TestPlanList: list prints each assignment (key, plan, set-at) and the
// count per plan, never an identity; --plan keeps one plan's; an
// assignment naming a plan the file no longer has is marked.
func TestPlanList(t *testing.T) {
	rs, env := planSetup(t)
	kf := keyFile(t, testAPIKey)
	keys := map[string]string{}
	for _, s := range []struct {
		plan string
		args []string
	}{
		{"gold", []string{"--ip", "10.0.0.1"}},
		{"gold", []string{"--ip", "10.0.0.2"}},
		{"free", []string{"--api-key-file", kf}},
	} {
		r := tlbctl(t, environ(env), append([]string{"plan", "set", "--plan", s.plan, "--yes"}, s.args...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		g := tlbctl(t, environ(env), append([]string{"plan", "get"}, s.args...)...)
		keys[assignmentKey(t, g.stdout)] = s.plan
	}
	// An assignment naming a plan a later file no longer has.
	r := tlbctl(t, environ(env), "plan", "set", "--plan", "gold", "--ip", "10.0.0.3", "--yes")
	require.Equal(t, exitOK, r.code, r.stderr)
	stale := assignmentKey(t, tlbctl(t, environ(env), "plan", "get", "--ip", "10.0.0.3").stdout)
	require.NoError(t, rs.Client().HSet(ctxT(t), stale, rateplan.FieldPlan, "platinum").Err())

	all := tlbctl(t, environ(env), "plan", "list")
	require.Equal(t, exitOK, all.code, all.stderr)
	for k, plan := range keys {
		assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(k)+` `+plan+` \d{4}-\d\d-\d\dT\S+Z$`, all.stdout)
	}
	assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(stale)+` platinum \S+Z \(the policy file has no such plan: on the default plan free\)$`, all.stdout)
	assert.Contains(t, all.stdout, "plan free: 1 assignment(s) (the default plan")
	assert.Contains(t, all.stdout, "plan gold: 2 assignment(s)\n")
	assert.Contains(t, all.stdout, "plan platinum: 1 assignment(s) (the policy file has no such plan)")
	assert.Contains(t, all.stdout, "4 assignment(s) in all")
	for _, identity := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", testAPIKey, subject.DigestAPIKey(testAPIKey).String()} {
		assert.NotContains(t, all.stdout, identity, "list never prints an identity")
	}

	gold := tlbctl(t, environ(env), "plan", "list", "--plan", "gold")
	require.Equal(t, exitOK, gold.code, gold.stderr)
	assert.Equal(t, 2, strings.Count(gold.stdout, "tlb:rate:plan:plan:"), gold.stdout)
	assert.NotContains(t, gold.stdout, " free ")
	assert.NotContains(t, gold.stdout, "platinum")
	assert.Contains(t, gold.stdout, "plan gold: 2 assignment(s)\n")
	assert.NotContains(t, gold.stdout, "plan free:")
	assert.Contains(t, gold.stdout, "2 assignment(s) in all")
}

// TestPlanSetCarriesTheWholeFreeLimit: a subject that consumed all of
// api-free's 5 is, after plan set gold, at 5 consumed of api-gold's 50
// (never a fresh 50), its api-free state stays empty for an instance that
// has not heard the change yet, and the change is published to a
// subscribed connection.
func TestPlanSetCarriesTheWholeFreeLimit(t *testing.T) {
	rs, env := planSetup(t)
	kf := keyFile(t, testAPIKey)
	cfg, err := config.Load(env)
	require.NoError(t, err)
	free, ok := cfg.RateLimit.Policies.Policy("api-free")
	require.True(t, ok)

	// Consume api-free's whole limit as the charge program would.
	ins := tlbctl(t, environ(env), "inspect", "--policy", "api-free", "--api-key-file", kf)
	require.Equal(t, exitOK, ins.code, ins.stderr)
	freeKey := keyOf(ins.stdout)
	now, err := rs.Client().Time(ctxT(t)).Result()
	require.NoError(t, err)
	r, st := programs.Charge(free, nil, now.UnixMilli(), free.Limit())
	require.Equal(t, programs.StatusAllowed, r.Status)
	require.NoError(t, rs.Client().Set(ctxT(t), freeKey, string(st), time.Duration(r.ExpiryMillis(free))*time.Millisecond).Err())
	full := tlbctl(t, environ(env), "inspect", "--policy", "api-free", "--api-key-file", kf)
	require.Contains(t, full.stdout, "remaining   0 of 5 (consumed 5)")

	dry := tlbctl(t, environ(env), "plan", "set", "--plan", "gold", "--api-key-file", kf)
	require.Equal(t, exitOK, dry.code, dry.stderr)
	assert.Contains(t, dry.stdout, "would move  base api: api-free -> api-gold, consumed now 5 of 5, would carry 5 of 50")

	sub := rs.Client().Subscribe(ctxT(t), ratedenial.Channel)
	t.Cleanup(func() { _ = sub.Close() })
	_, err = sub.Receive(ctxT(t))
	require.NoError(t, err)

	set := tlbctl(t, environ(env), "plan", "set", "--plan", "gold", "--api-key-file", kf, "--yes")
	require.Equal(t, exitOK, set.code, set.stderr)
	assert.Contains(t, set.stdout, "moved       base api: api-free -> api-gold, consumed 5, carried 5")
	assert.Contains(t, set.stdout, "moved       base login: login -> login-gold, consumed 0, carried 0")
	assert.Contains(t, set.stdout, "invalidation published on "+ratedenial.Channel+": 1 subscribed instance connection(s) received it")
	msg, err := sub.ReceiveMessage(ctxT(t))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(msg.Payload, "tlb:rate:plan:plan:"), "the assignment key is published first: %q", msg.Payload)

	gold := tlbctl(t, environ(env), "inspect", "--policy", "api-gold", "--api-key-file", kf)
	require.Equal(t, exitOK, gold.code, gold.stderr)
	assert.Contains(t, gold.stdout, "remaining   45 of 50 (consumed 5)", "the free limit's worth stays consumed")
	stale := tlbctl(t, environ(env), "inspect", "--policy", "api-free", "--api-key-file", kf)
	assert.Contains(t, stale.stdout, "remaining   0 of 5 (consumed 5)", "the old policy's state stays empty")
}

// TestPlanBadInput: a file without plans, an unknown --plan, an API key on
// the command line and malformed commands are one line on stderr, exit 2,
// and nothing reaches Redis.
func TestPlanBadInput(t *testing.T) {
	rs, env := planSetup(t)
	_, plain := setup(t) // the example policies: no plans
	kf := keyFile(t, testAPIKey)
	require.NoError(t, rs.Client().ConfigResetStat(ctxT(t)).Err())
	noPlans := environ(env, "APP_RATE_LIMIT_POLICIES_FILE", plain["APP_RATE_LIMIT_POLICIES_FILE"])
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no plans, set", noPlans, []string{"plan", "set", "--plan", "gold", "--ip", "10.0.0.1", "--yes"}, "plan set: the policy file " + plain["APP_RATE_LIMIT_POLICIES_FILE"] + " has no plans"},
		{"no plans, get", noPlans, []string{"plan", "get", "--api-key-file", kf}, "plan get: the policy file " + plain["APP_RATE_LIMIT_POLICIES_FILE"] + " has no plans"},
		{"no plans, unset", noPlans, []string{"plan", "unset", "--ip", "10.0.0.1", "--yes"}, "has no plans"},
		{"no plans, list", noPlans, []string{"plan", "list"}, "plan list: the policy file " + plain["APP_RATE_LIMIT_POLICIES_FILE"] + " has no plans"},
		{"unknown plan", environ(env), []string{"plan", "set", "--plan", "platinum", "--ip", "10.0.0.1", "--yes"}, `plan set: --plan "platinum": unknown plan (the policy file ` + env["APP_RATE_LIMIT_POLICIES_FILE"] + ` has plans: free, gold)`},
		{"unknown plan, list", environ(env), []string{"plan", "list", "--plan", "platinum"}, `plan list: --plan "platinum": unknown plan`},
		{"api key on argv", environ(env), []string{"plan", "set", "--plan", "gold", "--api-key", testAPIKey}, "plan set: --api-key is refused"},
		{"api key on argv, =", environ(env), []string{"plan", "get", "--api-key=" + testAPIKey}, "plan get: --api-key is refused"},
		{"api key before the subcommand", environ(env), []string{"plan", "--api-key", testAPIKey, "get"}, "plan: --api-key is refused"},
		{"no subcommand", environ(env), []string{"plan"}, "plan: want a subcommand: set, get, unset or list"},
		{"unknown subcommand", environ(env), []string{"plan", "move"}, `plan: unknown subcommand "move"`},
		{"set without plan", environ(env), []string{"plan", "set", "--ip", "10.0.0.1"}, "plan set: --plan is required"},
		{"two subjects", environ(env), []string{"plan", "get", "--ip", "10.0.0.1", "--principal", "alice"}, "exactly one of --api-key-file, --principal and --ip"},
		{"no subject", environ(env), []string{"plan", "unset", "--yes"}, "exactly one of --api-key-file, --principal and --ip"},
		{"subject on list", environ(env), []string{"plan", "list", "--ip", "10.0.0.1"}, "flag provided but not defined: -ip"},
		{"yes on get", environ(env), []string{"plan", "get", "--ip", "10.0.0.1", "--yes"}, "flag provided but not defined: -yes"},
		{"malformed address", environ(env), []string{"plan", "get", "--ip", "10.0.0.300"}, `--ip "10.0.0.300": not an IP address`},
		{"audit log a directory", environ(env), []string{"plan", "set", "--plan", "gold", "--ip", "10.0.0.1", "--yes", "--audit-log", t.TempDir()}, "--audit-log"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tlbctl(t, tc.env, tc.args...)
			assert.Equal(t, exitUsage, r.code, r.stderr)
			assert.Contains(t, r.stderr, tc.want)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(r.stderr), "\n")+1, "one line: %q", r.stderr)
			assert.NotContains(t, r.stderr, testAPIKey)
			assert.Empty(t, r.stdout)
		})
	}
	stats := redistest.CommandStats(t, rs.Client())
	for _, cmd := range []string{"hmget", "hset", "watch", "scan", "auth", "hello"} {
		assert.NotContains(t, stats, cmd, "bad input reached Redis")
	}
}

// TestPlanRedisErrors: a Redis that cannot be reached, or a user without
// the permissions, is exit 1 with the endpoint and user, and nothing is
// changed.
func TestPlanRedisErrors(t *testing.T) {
	rs, env := planSetup(t)
	down := tlbctl(t, environ(env, "APP_RATE_LIMIT_REDIS_ADDR", "127.0.0.1:1"), "plan", "list")
	assert.Equal(t, exitProblem, down.code)
	assert.Contains(t, down.stderr, "tlbctl: 127.0.0.1:1 as tlb-ctl: ")

	svc := tlbctl(t, environ(env, EnvUsername, "", EnvPassword, ""), "plan", "set", "--plan", "gold", "--ip", "10.0.0.1", "--yes", "--use-service-credentials")
	assert.Equal(t, exitProblem, svc.code)
	assert.Contains(t, svc.stderr, "as tlb-rate: ")
	assert.Contains(t, svc.stderr, "NOPERM")
	n := dataKeys(t, rs)
	assert.Zero(t, n, "nothing written")
}
