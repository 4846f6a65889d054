package reliability_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestNoSecretsInOutcomesLogsOrRedis: a run through every outcome kind
// (allowed, denied, Unavailable with a wrong password, Indeterminate under
// a swallowed reply, Incompatible on foreign state) with a password, an
// HMAC secret and subject digests; none of them appears in any outcome or
// cause rendering, in slog output of the requests, outcomes and client
// config, or anywhere in Redis (keys, values, CLIENT LIST).
// The HTTP-side scan (raw API keys, metrics output) belongs to the inbound
// adapter and app-bootstrap.
func TestNoSecretsInOutcomesLogsOrRedis(t *testing.T) {
	srv := redistest.Start(t)
	ownServer(t, srv)
	admin := srv.Client()
	const (
		password  = "pw-Zq8x3LmN0v-secret"
		secretRaw = "hmac-secret-K7d9Qw2Er5Ty8Ui0Op3As6Df"
	)
	require.NoError(t, admin.Do(redistest.AdminCtx(t), "ACL", "SETUSER", "tlb-rate", "reset", "on", ">"+password, "~*", "+@all").Err())
	secret, err := keyspace.NewSecret([]byte(secretRaw))
	require.NoError(t, err)
	keys, err := keyspace.NewBuilder("tlb", secret)
	require.NoError(t, err)
	pols := hourPolicies(t)
	proxy := startProxy(t, srv.Addr())

	cfg := clientConfig(proxy.Listen, faultTimeout, 4)
	cfg.Username, cfg.Password = "tlb-rate", password
	p := newProvider(t, cfg, keys, pols...)
	bad := cfg
	bad.Password = password + "-wrong"
	badClient, err := redisrate.NewClient(bad)
	require.NoError(t, err)
	badP, err := redisrate.New(badClient, keys, pols, redisrate.Options{CommandTimeout: bad.CommandTimeout, MaxInFlight: bad.PoolSize})
	require.NoError(t, err)
	t.Cleanup(func() { _ = badP.Close() })

	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var rendered strings.Builder
	subjects := []ratelimit.SubjectDigest{}
	seen := map[ratelimit.OutcomeKind]int{}
	record := func(req ratelimit.Request, out ratelimit.Outcome) {
		seen[out.Kind()]++
		logger.Info("decision", "request", req, "outcome", out, "config", cfg, "bad_config", bad)
		fmt.Fprintf(&rendered, "%v|%+v|%#v|%s\n", out, out, out, out)
		var cause error
		switch v := out.(type) {
		case ratelimit.Evaluated: // no cause
		case ratelimit.Unavailable:
			cause = v.Cause
		case ratelimit.Indeterminate:
			cause = v.Cause
		case ratelimit.Incompatible:
			cause = v.Cause
		}
		if cause != nil {
			fmt.Fprintf(&rendered, "%v|%+v|%s\n", cause, cause, cause.Error())
		}
		fmt.Fprintf(&rendered, "%v|%+v|%#v|%s|%v\n", req, req, req, req.SubjectDigest, cfg)
	}
	do := func(port ratelimit.EdgePort, pol ratelimit.Policy, cost int64) {
		s := randomSubject(t)
		subjects = append(subjects, s)
		req := ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: s, Cost: cost, Deadline: time.Now().Add(30 * time.Second)}
		record(req, port.Evaluate(context.Background(), req))
		record(req, port.Evaluate(context.Background(), req)) // denied the second time for cost 5 / limit 5
	}
	for _, pol := range pols {
		do(p, pol, 5)
		do(badP, pol, 1)
	}
	// Indeterminate: the reply is swallowed.
	warm := ratelimit.Request{PolicyID: pols[0].ID(), SubjectDigest: randomSubject(t), Cost: 1, Deadline: time.Now().Add(30 * time.Second)}
	record(warm, p.Evaluate(context.Background(), warm))
	remove := addToxic(t, proxy, `{"type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
	do(p, pols[1], 1)
	remove()
	// Incompatible: foreign state under the subject's key.
	s := randomSubject(t)
	key, err := redisrate.StateKey(keys, pols[2], s)
	require.NoError(t, err)
	require.NoError(t, admin.Set(redistest.AdminCtx(t), key, "garbage-"+string(s), time.Minute).Err())
	req := ratelimit.Request{PolicyID: pols[2].ID(), SubjectDigest: s, Cost: 1, Deadline: time.Now().Add(30 * time.Second)}
	record(req, p.Evaluate(context.Background(), req))
	require.NoError(t, admin.Del(redistest.AdminCtx(t), key).Err()) // our own planted value contains s by design

	for _, k := range []ratelimit.OutcomeKind{ratelimit.KindEvaluated, ratelimit.KindUnavailable, ratelimit.KindIndeterminate, ratelimit.KindIncompatible} {
		require.Positive(t, seen[k], "the run produced a %s outcome (%v)", k, seen)
	}

	// Everything in Redis.
	var dump strings.Builder
	ks, err := admin.Keys(redistest.AdminCtx(t), "*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, ks)
	for _, k := range ks {
		dump.WriteString(k + "\n")
		typ, err := admin.Type(redistest.AdminCtx(t), k).Result()
		require.NoError(t, err)
		if typ == "string" { // rate state: one binary value
			v, err := admin.Get(redistest.AdminCtx(t), k).Result()
			require.NoError(t, err)
			fmt.Fprintln(&dump, v)
			continue
		}
		v, err := admin.HGetAll(redistest.AdminCtx(t), k).Result() // dedup hash
		require.NoError(t, err)
		fmt.Fprintln(&dump, v)
	}
	clients, err := admin.ClientList(redistest.AdminCtx(t)).Result()
	require.NoError(t, err)
	dump.WriteString(clients)

	haystacks := map[string]string{"outcomes and causes": rendered.String(), "slog output": logs.String(), "redis": dump.String()}
	needles := map[string]string{"password": password, "hmac secret": secretRaw}
	for i, s := range subjects {
		needles[fmt.Sprintf("subject digest %d", i)] = string(s)
	}
	for hn, h := range haystacks {
		require.NotEmpty(t, h)
		for nn, n := range needles {
			assert.NotContains(t, h, n, "%s contains the %s", hn, nn)
		}
	}
}
