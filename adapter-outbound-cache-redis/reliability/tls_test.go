package reliability_test

// The TLS lane: a real redis-server that speaks only TLS (tls-port, port 0)
// with certificates the test generates (redistest.CA), mutual TLS
// (tls-auth-clients yes) and optional client certificates.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rediscache"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/cache"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// tlsTimeout is the command and dial timeout of the TLS lane: a TLS
// handshake under -race on two busy cores needs more than the plaintext
// lanes' budget.
const tlsTimeout = 2 * time.Second

// applyACLUsers creates the least-privilege users of docs/operations.md.
// After a restart the admin client's idle connections are dead (a TLS
// connection's peer close is not seen before reuse): a few PINGs drop them.
func applyACLUsers(t *testing.T, srv *redistest.Server) {
	t.Helper()
	for range 8 {
		if srv.Client().Ping(redistest.AdminCtx(t)).Err() == nil {
			break
		}
	}
	require.NoError(t, srv.Client().Do(redistest.AdminCtx(t), aclRateUser(t)...).Err())
	require.NoError(t, srv.Client().Do(redistest.AdminCtx(t), aclCacheUser(t)...).Err())
}

// tlsKeys is a keyspace under the deployed prefix "tlb", which the ACL
// users' key patterns name.
func tlsKeys(t *testing.T) *keyspace.Builder {
	t.Helper()
	secret, err := keyspace.NewSecret([]byte("tls-lane-secret-0123456789abcdef"))
	require.NoError(t, err)
	keys, err := keyspace.NewBuilder("tlb", secret)
	require.NoError(t, err)
	return keys
}

// rateTLSConfig is the coordination client of the TLS lane as tlb-rate,
// with its own client certificate from the server's CA.
func rateTLSConfig(t *testing.T, srv *redistest.Server) redisrate.ClientConfig {
	t.Helper()
	m := srv.TLS()
	cert := m.CA.Issue(t, "tlb-rate", redistest.CertOptions{})
	cfg := clientConfig(srv.Addr(), tlsTimeout, 4)
	cfg.Username, cfg.Password, cfg.ClientName = "tlb-rate", "rate-test-pass", "tlb-rate-tls-test"
	cfg.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: m.CA.Pool(), Certificates: []tls.Certificate{cert.TLS}}
	return cfg
}

// TestTLSProviderAndCacheAsACLUsers: over mutual TLS, as the
// least-privilege users, the provider evaluates all three programs, falls
// back to one EVAL after SCRIPT FLUSH, fails closed while the server is
// down and recovers after its restart; the cache store sets, gets and
// compare-and-replaces.
func TestTLSProviderAndCacheAsACLUsers(t *testing.T) {
	srv := redistest.Start(t, redistest.WithTLS(redistest.TLSOptions{}))
	srv.Require(t, redistest.CapKill, redistest.CapRestart)
	applyACLUsers(t, srv)
	admin := srv.Client()
	keys := tlsKeys(t)
	pols := hourPolicies(t)
	p := newProvider(t, rateTLSConfig(t, srv), keys, pols...)
	subject := randomSubject(t)

	for _, pol := range pols {
		out := ask(p, pol.ID(), subject, 1)
		require.True(t, ratelimit.Admitted(out), "%s over TLS as tlb-rate: %v", pol.ID(), out)
	}
	// The exact counts are asserted on the token bucket (one token an
	// hour): a fixed or sliding window could roll over during the test.
	bucket := pols[2].ID()
	out := ask(p, bucket, subject, 5) // cost 5 exceeds the 4 left: denied, nothing taken
	e, ok := out.(ratelimit.Evaluated)
	require.True(t, ok, "%v", out)
	assert.False(t, e.Decision.Allowed)
	assert.Equal(t, int64(4), e.Decision.Remaining)

	t.Run("NOSCRIPT fallback", func(t *testing.T) {
		resetStats(t, admin)
		require.NoError(t, admin.ScriptFlush(redistest.AdminCtx(t)).Err())
		out := ask(p, bucket, subject, 1)
		require.True(t, ratelimit.Admitted(out), "%v", out)
		assert.Equal(t, int64(3), out.(ratelimit.Evaluated).Decision.Remaining)
		assert.Equal(t, 1, calls(t, admin, "eval"), "exactly one EVAL after NOSCRIPT")
	})

	t.Run("cache store as tlb-cache", func(t *testing.T) {
		m := srv.TLS()
		ccfg := rediscache.DefaultConfig(srv.Addr())
		ccfg.Username, ccfg.Password = "tlb-cache", "cache-test-pass"
		ccfg.DialTimeout, ccfg.CommandTimeout, ccfg.PoolTimeout = tlsTimeout, tlsTimeout, tlsTimeout
		cert := m.CA.Issue(t, "tlb-cache", redistest.CertOptions{})
		ccfg.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: m.CA.Pool(), Certificates: []tls.Certificate{cert.TLS}}
		cclient, err := rediscache.NewClient(ccfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cclient.Close() })
		store, err := rediscache.New(cclient, keys)
		require.NoError(t, err)
		ctx := redistest.AdminCtx(t)
		ck := cache.Key{Region: "tls", Kind: "item", Name: "one"}
		require.NoError(t, store.Set(ctx, ck, []byte("v1"), time.Minute))
		e, ok, err := store.Get(ctx, ck)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, []byte("v1"), e.Value)
		replaced, err := store.CompareAndReplace(ctx, ck, e.Token, []byte("v2"), time.Minute)
		require.NoError(t, err)
		assert.True(t, replaced)
	})

	t.Run("kill and restart", func(t *testing.T) {
		srv.Kill()
		time.Sleep(50 * time.Millisecond) // let the kernel deliver the peer close to idle connections
		// go-redis cannot health-check an idle *tls.Conn before reuse, so a
		// call on a connection the dead server left in the pool was
		// written before the loss was seen: Indeterminate{connection_lost}
		// (at most one per idle connection, PoolSize 4). Every later call
		// dials and is refused: Unavailable{connection}.
		var outs []ratelimit.Outcome
		for range 6 {
			out := ask(p, bucket, subject, 1)
			outs = append(outs, out)
			assert.False(t, ratelimit.Admitted(out), "%v", out)
			switch out.Kind() {
			case ratelimit.KindUnavailable:
				assert.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(out), "%v", out)
			case ratelimit.KindIndeterminate:
				assert.Equal(t, ratelimit.CategoryConnectionLost, ratelimit.CategoryOf(out), "%v", out)
			default:
				t.Errorf("server down: %v", out)
			}
		}
		last := outs[len(outs)-1]
		assert.Equal(t, ratelimit.KindUnavailable, last.Kind(), "stale connections are dropped after their failure: %v", outs)
		srv.Restart()
		applyACLUsers(t, srv) // no persistence: the users are set again
		var out ratelimit.Outcome
		require.Eventually(t, func() bool {
			out = ask(p, bucket, subject, 1)
			return out.Kind() == ratelimit.KindEvaluated
		}, 10*time.Second, 50*time.Millisecond, "the provider recovers over TLS without a rebuild")
		assert.True(t, ratelimit.Admitted(out))
		assert.Equal(t, int64(4), out.(ratelimit.Evaluated).Decision.Remaining, "the restarted server is empty")
	})
}

// TestTLSOptionalClientCertificate: with tls-auth-clients optional the
// provider connects without a client certificate.
func TestTLSOptionalClientCertificate(t *testing.T) {
	srv := redistest.Start(t, redistest.WithTLS(redistest.TLSOptions{AuthClients: redistest.TLSAuthOptional}))
	applyACLUsers(t, srv)
	cfg := rateTLSConfig(t, srv)
	cfg.TLSConfig.Certificates = nil
	p := newProvider(t, cfg, tlsKeys(t), hourPolicies(t)...)
	out := ask(p, "r-fixed", randomSubject(t), 1)
	require.True(t, ratelimit.Admitted(out), "%v", out)
}

// TestTLSFailuresFailClosed: each TLS misconfiguration fails Start with an
// error that says what is wrong, and fails every request closed with
// Unavailable{connection}; nothing is admitted and no state is written.
func TestTLSFailuresFailClosed(t *testing.T) {
	srv := redistest.Start(t, redistest.WithTLS(redistest.TLSOptions{}))
	applyACLUsers(t, srv)
	m := srv.TLS()
	expiredSrv := redistest.Start(t, redistest.WithTLS(redistest.TLSOptions{
		CA: m.CA,
		ServerCert: m.CA.Issue(t, "expired", redistest.CertOptions{
			Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
			NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour),
		}),
	}))
	applyACLUsers(t, expiredSrv)
	plainSrv := redistest.Start(t)
	applyACLUsers(t, plainSrv)
	other := redistest.NewCA(t)

	cases := []struct {
		name   string
		srv    *redistest.Server
		mutate func(*redisrate.ClientConfig)
		check  func(t *testing.T, err error)
	}{
		{"unknown CA", srv, func(c *redisrate.ClientConfig) { c.TLSConfig.RootCAs = other.Pool() },
			func(t *testing.T, err error) {
				var uae x509.UnknownAuthorityError
				assert.ErrorAs(t, err, &uae)
				assert.ErrorIs(t, err, redisrate.ErrTLSHandshake)
			}},
		{"wrong server name", srv, func(c *redisrate.ClientConfig) { c.TLSConfig.ServerName = "wrong.test" },
			func(t *testing.T, err error) {
				var he x509.HostnameError
				assert.ErrorAs(t, err, &he)
				assert.ErrorIs(t, err, redisrate.ErrTLSHandshake)
			}},
		{"expired server certificate", expiredSrv, nil,
			func(t *testing.T, err error) {
				var cie x509.CertificateInvalidError
				require.ErrorAs(t, err, &cie)
				assert.Equal(t, x509.Expired, cie.Reason)
			}},
		{"client certificate missing", srv, func(c *redisrate.ClientConfig) { c.TLSConfig.Certificates = nil },
			func(t *testing.T, err error) {
				// TLS 1.3: the client's handshake completes; the server's
				// alert ("certificate required") arrives with the first
				// read of HELLO, or the write of HELLO meets the reset.
				assert.True(t, strings.Contains(err.Error(), "certificate required") || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF), "%v", err)
			}},
		{"plaintext against the TLS port", srv, func(c *redisrate.ClientConfig) { c.TLSConfig = nil },
			func(t *testing.T, err error) {
				assert.True(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET), "the server drops a non-TLS client: %v", err)
			}},
		{"TLS against a plaintext port", plainSrv, nil,
			func(t *testing.T, err error) {
				assert.ErrorIs(t, err, redisrate.ErrTLSHandshake)
			}},
	}
	keys := tlsKeys(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := rateTLSConfig(t, srv)
			cfg.Addr = tc.srv.Addr()
			// The dial (with the handshake) ends before the command
			// timeout, so a handshake a plaintext server never answers is
			// reported as the dial's failure, not as Start's deadline.
			cfg.CommandTimeout, cfg.DialTimeout, cfg.PoolTimeout = time.Second, 500*time.Millisecond, time.Second
			if tc.mutate != nil {
				tc.mutate(&cfg)
			}
			client, err := redisrate.NewClient(cfg)
			require.NoError(t, err)
			p, err := redisrate.New(client, keys, hourPolicies(t), redisrate.Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = p.Start(ctx)
			require.Error(t, err, "Start must fail")
			tc.check(t, err)
			require.Error(t, p.Ready(ctx), "not ready")

			for _, pol := range hourPolicies(t) {
				out := ask(p, pol.ID(), randomSubject(t), 1)
				assert.False(t, ratelimit.Admitted(out), "%v", out)
				assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
				assert.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(out), "%v", out)
			}
			n, err := tc.srv.Client().DBSize(redistest.AdminCtx(t)).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "nothing was written")
		})
	}
}
