package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/wiring"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Check statuses.
const (
	statusOK      = "ok"
	statusProblem = "PROBLEM"
	statusInfo    = "info"
	statusSkipped = "skipped"
)

// row is one line of the check table.
type row struct{ check, status, detail string }

// runCheck runs every check and prints the table; problems make it fail.
func runCheck(ctx context.Context, args, environ []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(environ)
	if err != nil {
		return err
	}
	client, user, err := connect(cfg, environ)
	if err != nil {
		return err
	}
	defer client.Close()
	rows := checks(ctx, cfg, client, user)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
	problems := 0
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.check, r.status, r.detail)
		if r.status == statusProblem {
			problems++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if problems > 0 {
		return problemsError{problems}
	}
	return nil
}

// checks runs the checks in order; after a failed connection the rest are
// skipped.
func checks(ctx context.Context, cfg config.Config, c *redis.Client, user string) []row {
	rl := cfg.RateLimit
	rows := []row{}
	if err := c.Ping(ctx).Err(); err != nil {
		err = wiring.ExplainConnError(config.Prefix+"RATE_LIMIT_REDIS_", rl.Redis, err)
		rows = append(rows, row{"connection", statusProblem, fmt.Sprintf("%s as %s: %v", rl.Redis.Addr, user, err)})
		for _, name := range []string{"tls", "server version", "role", "eviction policy", "persistence", "scripts", "provider acl"} {
			rows = append(rows, row{name, statusSkipped, "no connection"})
		}
		return rows
	}
	rows = append(rows, row{"connection", statusOK, fmt.Sprintf("%s as %s", rl.Redis.Addr, user)})
	rows = append(rows, tlsRow(ctx, rl.Redis, rl.DialTimeout))
	rows = append(rows, versionRow(ctx, c))
	rows = append(rows, roleRow(ctx, c))
	rows = append(rows, evictionRow(ctx, c))
	rows = append(rows, persistenceRow(ctx, c))
	rows = append(rows, scriptsRow(ctx, c))
	rows = append(rows, aclRow(ctx, cfg, c))
	return rows
}

// certWarning is how close to expiry the server certificate makes the
// tls check a problem.
const certWarning = 14 * 24 * time.Hour

// tlsRow reports the TLS settings and, with TLS on, what a fresh handshake
// negotiated: version and the server certificate's expiry (a problem
// within certWarning).
func tlsRow(ctx context.Context, r config.Redis, dialTimeout time.Duration) row {
	if !r.TLS.Enabled {
		return row{"tls", statusInfo, "off (" + config.Prefix + "RATE_LIMIT_REDIS_TLS_ENABLED=false)"}
	}
	ca := "system roots"
	if r.TLS.CAFile != "" {
		ca = r.TLS.CAFile
	}
	client := "no client certificate"
	if r.TLS.CertFile != "" {
		client = "client certificate " + r.TLS.CertFile
	}
	cfg := r.TLSConfig()
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: max(dialTimeout, commandTimeout)}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", r.Addr)
	if err != nil {
		err = wiring.ExplainConnError(config.Prefix+"RATE_LIMIT_REDIS_", r, err)
		return row{"tls", statusProblem, fmt.Sprintf("handshake: %v", err)}
	}
	defer conn.Close()
	st := conn.(*tls.Conn).ConnectionState()
	detail := fmt.Sprintf("%s, verified against %s, server name %s, %s", tls.VersionName(st.Version), ca, cfg.ServerName, client)
	if len(st.PeerCertificates) == 0 {
		return row{"tls", statusOK, detail}
	}
	notAfter := st.PeerCertificates[0].NotAfter
	left := time.Until(notAfter)
	detail += fmt.Sprintf(", server certificate valid until %s", notAfter.UTC().Format(time.RFC3339))
	if left < certWarning {
		return row{"tls", statusProblem, detail + fmt.Sprintf(" (expires in %v: renew it)", left.Round(time.Hour))}
	}
	return row{"tls", statusOK, detail}
}

func info(ctx context.Context, c *redis.Client, section string) (string, error) {
	return c.Info(ctx, section).Result()
}

func versionRow(ctx context.Context, c *redis.Client) row {
	text, err := info(ctx, c, "server")
	if err != nil {
		return row{"server version", statusProblem, "INFO server: " + err.Error()}
	}
	v, _ := redisinfo.Field(text, "redis_version")
	got, err := redisinfo.ParseVersion(v)
	if err != nil {
		return row{"server version", statusProblem, fmt.Sprintf("unreadable redis_version %q", bounded(v))}
	}
	need, _ := redisinfo.ParseVersion(programs.MinRedisVersion)
	if got.Compare(need) < 0 {
		return row{"server version", statusProblem, fmt.Sprintf("%s is below the programs' minimum %s", v, programs.MinRedisVersion)}
	}
	return row{"server version", statusOK, fmt.Sprintf("%s (programs need %s)", v, programs.MinRedisVersion)}
}

func roleRow(ctx context.Context, c *redis.Client) row {
	text, err := info(ctx, c, "replication")
	if err != nil {
		return row{"role", statusProblem, "INFO replication: " + err.Error()}
	}
	role, _ := redisinfo.Field(text, "role")
	replicas, _ := redisinfo.Field(text, "connected_slaves")
	if role != "master" {
		return row{"role", statusProblem, fmt.Sprintf("role:%s: the coordination endpoint must be a primary (a replica refuses every write)", bounded(role))}
	}
	return row{"role", statusOK, "master, connected replicas " + replicas}
}

func evictionRow(ctx context.Context, c *redis.Client) row {
	v, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return row{"eviction policy", statusProblem, "CONFIG GET maxmemory-policy: " + err.Error() + " (a managed Redis may disable CONFIG)"}
	}
	policy := v["maxmemory-policy"]
	if policy != "noeviction" {
		return row{"eviction policy", statusProblem, fmt.Sprintf("maxmemory-policy %s may evict live limiter state and reopen a limit; set noeviction", bounded(policy))}
	}
	return row{"eviction policy", statusOK, "noeviction"}
}

func persistenceRow(ctx context.Context, c *redis.Client) row {
	text, err := info(ctx, c, "persistence")
	if err != nil {
		return row{"persistence", statusProblem, "INFO persistence: " + err.Error()}
	}
	aof, _ := redisinfo.Field(text, "aof_enabled")
	lastSave, _ := redisinfo.Field(text, "rdb_last_save_time")
	changes, _ := redisinfo.Field(text, "rdb_changes_since_last_save")
	return row{"persistence", statusInfo, fmt.Sprintf("aof_enabled=%s rdb_last_save_time=%s rdb_changes_since_last_save=%s", aof, lastSave, changes)}
}

func scriptsRow(ctx context.Context, c *redis.Client) row {
	var loaded []string
	for _, p := range programs.All() {
		sha, err := c.ScriptLoad(ctx, p.Source).Result()
		if err != nil {
			return row{"scripts", statusProblem, fmt.Sprintf("SCRIPT LOAD %s: %v", p.Name, err)}
		}
		if sha != p.SHA1 {
			return row{"scripts", statusProblem, fmt.Sprintf("%s loaded as %s, manifest has %s", p.Name, bounded(sha), p.SHA1)}
		}
		loaded = append(loaded, p.Name)
	}
	return row{"scripts", statusOK, "loaded " + strings.Join(loaded, ", ")}
}

// aclRow asks the server (ACL DRYRUN) whether the provider's user may run
// every command the provider sends, on a key of its own prefix.
func aclRow(ctx context.Context, cfg config.Config, c *redis.Client) row {
	rl := cfg.RateLimit
	user := rl.Redis.Username
	if user == "" {
		user = "default"
	}
	key, err := sampleKey(cfg)
	if err != nil {
		return row{"provider acl", statusProblem, err.Error()}
	}
	var denied []string
	for _, cmd := range providerCommands(key) {
		args := append([]any{"ACL", "DRYRUN", user}, cmd...)
		res, err := c.Do(ctx, args...).Text()
		if err != nil {
			return row{"provider acl", statusProblem, fmt.Sprintf("ACL DRYRUN %s %v: %v", user, cmd[0], err)}
		}
		if res != "OK" {
			denied = append(denied, fmt.Sprint(cmd[0]))
		}
	}
	if len(denied) > 0 {
		return row{"provider acl", statusProblem, fmt.Sprintf("user %s may not run: %s (docs/operations.md has the ACL line)", user, strings.Join(denied, ", "))}
	}
	return row{"provider acl", statusOK, fmt.Sprintf("user %s may run all %d provider commands on %s:%s:*", user, len(providerCommands(key)), rl.KeyPrefix, redisrate.KeyCapability)}
}

// providerCommands are the commands the provider sends (and those its
// programs run inside), as ACL DRYRUN arguments on key.
func providerCommands(key string) [][]any {
	sha := programs.All()[0].SHA1
	return [][]any{
		{"PING"},
		{"INFO", "server"},
		{"INFO", "replication"},
		{"INFO", "persistence"},
		{"CONFIG", "GET", "maxmemory-policy"},
		{"CLIENT", "SETNAME", "tlb-coordination"},
		{"SCRIPT", "LOAD", "return 1"},
		{"EVALSHA", sha, "1", key},
		{"EVAL", "return 1", "1", key},
		{"GET", key},
		{"SET", key, "v", "PX", "1000"},
		{"TIME"},
		// Inside the dedup programs (policies with a dedupWindow).
		{"HGETALL", key},
		{"HSET", key, "v", "1"},
		{"PEXPIRE", key, "1000"},
		{"HGET", key, "id"},
		{"HLEN", key},
		{"HDEL", key, "id"},
		{"PTTL", key},
	}
}

// sampleKey is a state key of the first policy for a fixed digest: the
// provider's key pattern, for ACL DRYRUN.
func sampleKey(cfg config.Config) (string, error) {
	rl := cfg.RateLimit
	keys, err := keyspace.NewBuilder(rl.KeyPrefix, rl.KeySecret)
	if err != nil {
		return "", fmt.Errorf("keyspace: %w", err)
	}
	return redisrate.StateKey(keys, rl.Policies.Policies[0], ratelimit.SubjectDigest(strings.Repeat("A", keyspace.DigestLen)))
}
