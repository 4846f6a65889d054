package main_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// randomToken is prefix + 32 random base64url characters.
func randomToken(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 24)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// encodings are s and its hex and base64 renderings.
func encodings(s string) map[string]string {
	b := []byte(s)
	return map[string]string{
		"raw":         s,
		"hex":         hex.EncodeToString(b),
		"HEX":         strings.ToUpper(hex.EncodeToString(b)),
		"base64":      base64.StdEncoding.EncodeToString(b),
		"base64raw":   base64.RawStdEncoding.EncodeToString(b),
		"base64url":   base64.URLEncoding.EncodeToString(b),
		"base64urlnp": base64.RawURLEncoding.EncodeToString(b),
	}
}

// leakCorpus collects every byte the run produced, by source.
type leakCorpus struct {
	mu  sync.Mutex
	src map[string]*strings.Builder
}

// redisDump renders every key of srv (SCAN, TYPE, DUMP and the typed
// value), CLIENT LIST, ACL LOG and SLOWLOG (every command the service sent,
// with slowlog-log-slower-than 0).
func redisDump(t *testing.T, srv *redistest.Server) (dump string, keys int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin := srv.Client()
	var b strings.Builder
	slow, err := admin.Do(ctx, "SLOWLOG", "GET", "-1").Result()
	require.NoError(t, err)
	fmt.Fprintf(&b, "slowlog %v\n", slow)
	acl, err := admin.Do(ctx, "ACL", "LOG").Result()
	require.NoError(t, err)
	fmt.Fprintf(&b, "acl log %v\n", acl)
	clients, err := admin.ClientList(ctx).Result()
	require.NoError(t, err)
	b.WriteString(clients)
	var cursor uint64
	for range 1000 {
		var batch []string
		batch, cursor, err = admin.Scan(ctx, cursor, "*", 100).Result()
		require.NoError(t, err)
		for _, k := range batch {
			keys++
			typ, err := admin.Type(ctx, k).Result()
			require.NoError(t, err)
			fmt.Fprintf(&b, "key %q type %s\n", k, typ)
			d, err := admin.Dump(ctx, k).Result()
			if !errors.Is(err, redis.Nil) {
				require.NoError(t, err)
			}
			fmt.Fprintf(&b, "dump %q\n%s\n", d, d)
			switch typ {
			case "hash":
				v, err := admin.HGetAll(ctx, k).Result()
				require.NoError(t, err)
				fmt.Fprintf(&b, "hash %v\n", v)
			case "string":
				v, err := admin.Get(ctx, k).Result()
				require.NoError(t, err)
				fmt.Fprintf(&b, "string %q\n", v)
			}
		}
		if cursor == 0 {
			break
		}
	}
	require.Zero(t, cursor, "SCAN finished within 1000 rounds")
	return b.String(), keys
}

// aclUser creates an ACL user with a password on srv and empties the
// slowlog of the setup, so that it then records only the service's commands.
func aclUser(t *testing.T, srv *redistest.Server, user, password string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := srv.Client()
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", user, "reset", "on", ">"+password, "~*", "+@all").Err())
	require.NoError(t, admin.Do(ctx, "SLOWLOG", "RESET").Err())
}
