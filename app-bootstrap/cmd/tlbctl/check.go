package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
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
	useService := fs.Bool(flagUseServiceCredentials, false, "connect as the service's ACL user")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(environ)
	if err != nil {
		return err
	}
	client, user, err := connect(cfg, environ, *useService)
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

// nodeChecks are the checks run on each server that holds state (the
// primary, or every cluster primary), in order.
var nodeChecks = []string{"tls", "server version", "role", "eviction policy", "persistence", "scripts", "provider acl", "denial cache acl"}

// checks runs the checks in order; after a failed connection the rest are
// skipped. In cluster mode the server checks run on every primary, each
// row naming the primary's address.
func checks(ctx context.Context, cfg config.Config, c redis.UniversalClient, user string) []row {
	rl := cfg.RateLimit
	where := endpoint(rl)
	rows := []row{}
	if err := c.Ping(ctx).Err(); err != nil {
		err = wiring.ExplainConnError(config.Prefix+"RATE_LIMIT_REDIS_", rl.Redis, err)
		rows = append(rows, row{"connection", statusProblem, fmt.Sprintf("%s as %s: %v", where, user, err)})
		for _, name := range nodeChecks {
			rows = append(rows, row{name, statusSkipped, "no connection"})
		}
		return rows
	}
	rows = append(rows, row{"connection", statusOK, fmt.Sprintf("%s as %s", where, user)})
	switch c := c.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		per := map[string][]row{}
		err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			addr := n.Options().Addr
			rs := nodeRows(ctx, cfg, n, addr)
			for i := range rs {
				rs[i].check += " " + addr
			}
			mu.Lock()
			per[addr] = rs
			mu.Unlock()
			return nil
		})
		if err != nil {
			return append(rows, row{"primaries", statusProblem, err.Error()})
		}
		addrs := make([]string, 0, len(per))
		for a := range per {
			addrs = append(addrs, a)
		}
		sort.Strings(addrs)
		rows = append(rows, row{"primaries", statusInfo, fmt.Sprintf("%d: %s", len(addrs), strings.Join(addrs, ", "))})
		for _, a := range addrs {
			rows = append(rows, per[a]...)
		}
	case *redis.Client:
		addr := ""
		if rl.Topology.Mode == config.ModeStandalone || rl.Topology.Mode == "" {
			addr = rl.Redis.Addr
		}
		rows = append(rows, nodeRows(ctx, cfg, c, addr)...)
	}
	return rows
}

// nodeRows runs nodeChecks on one server; addr is its address for the TLS
// handshake ("" in sentinel mode, where the client finds the primary).
func nodeRows(ctx context.Context, cfg config.Config, c *redis.Client, addr string) []row {
	rl := cfg.RateLimit
	return []row{
		tlsRow(ctx, rl.Redis, addr, rl.DialTimeout),
		versionRow(ctx, c),
		roleRow(ctx, c),
		evictionRow(ctx, c),
		persistenceRow(ctx, c),
		scriptsRow(ctx, cfg, c),
		aclRow(ctx, cfg, c),
		denialRow(ctx, cfg, c),
	}
}

// certWarning is how close to expiry the server certificate makes the
// tls check a problem.
const certWarning = 14 * 24 * time.Hour

// tlsRow reports the TLS settings and, with TLS on, what a fresh handshake
// with addr negotiated: version and the server certificate's expiry (a
// problem within certWarning). In sentinel mode (addr "") the primary's
// address is the client's to find: the row says the connection verified
// the certificate and that the expiry is not read.
func tlsRow(ctx context.Context, r config.Redis, addr string, dialTimeout time.Duration) row {
	if !r.TLS.Enabled {
		return row{"tls", statusInfo, "off (" + config.Prefix + "RATE_LIMIT_REDIS_TLS_ENABLED=false)"}
	}
	if addr == "" {
		return row{"tls", statusInfo, "on: the connection verified the primary's certificate; its expiry is not read in sentinel mode (run check in standalone mode against the primary's address)"}
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
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		err = wiring.ExplainConnError(config.Prefix+"RATE_LIMIT_REDIS_", r, err)
		return row{"tls", statusProblem, fmt.Sprintf("handshake: %v", err)}
	}
	defer conn.Close()
	st := conn.(*tls.Conn).ConnectionState()
	serverName := cfg.ServerName
	if serverName == "" {
		serverName, _, _ = net.SplitHostPort(addr)
	}
	detail := fmt.Sprintf("%s, verified against %s, server name %s, %s", tls.VersionName(st.Version), ca, serverName, client)
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
	cmds := providerCommands(cfg, key)
	if rl.Topology.Mode == config.ModeCluster {
		// The provider reads the slot map itself (internal/send).
		cmds = append(cmds, []any{"CLUSTER", "SLOTS"})
	}
	var denied []string
	for _, cmd := range cmds {
		args := append([]any{"ACL", "DRYRUN", user}, cmd...)
		res, err := c.Do(ctx, args...).Text()
		if err != nil {
			return row{"provider acl", statusProblem, fmt.Sprintf("ACL DRYRUN %s %v: %v", user, cmd[0], err)}
		}
		if res != "OK" {
			denied = append(denied, commandName(cmd))
		}
	}
	if len(denied) > 0 {
		return row{"provider acl", statusProblem, fmt.Sprintf("user %s may not run: %s (docs/operations.md has the ACL line)", user, strings.Join(denied, ", "))}
	}
	return row{"provider acl", statusOK, fmt.Sprintf("user %s may run all %d provider commands on %s:%s:*", user, len(cmds), rl.KeyPrefix, redisrate.KeyCapability)}
}

// commandName is a command as an ACL names it: CLUSTER|SLOTS for a
// container command's subcommand, PEXPIRE otherwise.
func commandName(cmd []any) string {
	switch cmd[0] {
	case "CLUSTER", "CONFIG", "SCRIPT", "CLIENT":
		return fmt.Sprintf("%v|%v", cmd[0], cmd[1])
	}
	return fmt.Sprint(cmd[0])
}

// providerCommands are the commands the provider sends (and those its
// programs run inside), as ACL DRYRUN arguments on key.
func providerCommands(cfg config.Config, key string) [][]any {
	sha := ""
	if b, err := programs.ForPolicy(cfg.RateLimit.Policies.Policies[0]); err == nil {
		sha = b.Decide.SHA1 // the first policy's bound decision program (ADR 0035)
	}
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

// denialRow reports whether the provider's user may subscribe to the
// denial cache's invalidations and publish its heartbeats (ADR 0022). Without it the service works
// and its denial cache stays off: info, not a problem.
func denialRow(ctx context.Context, cfg config.Config, c *redis.Client) row {
	user := cfg.RateLimit.Redis.Username
	if user == "" {
		user = "default"
	}
	hb := ratedenial.HeartbeatChannelPrefix + "0123456789abcdef"
	var denied []string
	for _, cmd := range [][]any{{"SUBSCRIBE", ratedenial.Channel, hb}, {"PUBLISH", hb, "1"}} {
		res, err := c.Do(ctx, append([]any{"ACL", "DRYRUN", user}, cmd...)...).Text()
		if err != nil {
			return row{"denial cache acl", statusProblem, fmt.Sprintf("ACL DRYRUN %s %v: %v", user, cmd[0], err)}
		}
		if res != "OK" {
			denied = append(denied, fmt.Sprint(cmd[0]))
		}
	}
	if len(denied) > 0 {
		return row{"denial cache acl", statusInfo, fmt.Sprintf("user %s may not %s on %s*: the service's denial cache stays off (docs/operations.md has the ACL line)", user, strings.Join(denied, ", "), ratedenial.Channel)}
	}
	return row{"denial cache acl", statusOK, fmt.Sprintf("user %s may subscribe to %s and its heartbeat channel", user, ratedenial.Channel)}
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
