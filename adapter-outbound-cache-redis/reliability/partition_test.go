//go:build partitions

package reliability_test

// The partition lane (make test-partitions, fault-matrix row 21): every
// Redis process runs in its own network namespace that the test creates,
// joined by a bridge inside a private "switch" namespace (so the host's
// firewall never sees the traffic); the test process reaches every node
// through its own veth into that switch. A partition is a set of blackhole
// host routes inside the node namespaces: the primary and one sentinel
// (the minority) lose the replica and two sentinels (the majority), while
// the limiter keeps reaching all of them. Needs root and iproute2; every
// namespace, link and process is removed at the end, also on failure.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/rediscluster"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// netLab is the namespaces, links and processes of one test.
type netLab struct {
	t      *testing.T
	sfx    string
	subnet string // "10.231.N"
	sw     string // switch namespace
	nodes  []string
	procs  []*exec.Cmd
	mu     sync.Mutex
}

func run(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	require.NoErrorf(t, err, "%s: %s", strings.Join(args, " "), out)
}

// newNetLab creates the switch namespace with a bridge and the host's veth
// into it (host address <subnet>.1).
func newNetLab(t *testing.T) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("partition lane: needs root (network namespaces)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("partition lane: iproute2 (ip) not on PATH")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	l := &netLab{t: t, sfx: hex.EncodeToString(b[:2]), subnet: fmt.Sprintf("10.231.%d", 1+int(b[2])%250)}
	l.sw = "tlb" + l.sfx + "sw"
	t.Cleanup(l.cleanup)
	run(t, "ip", "netns", "add", l.sw)
	run(t, "ip", "-n", l.sw, "link", "add", "br0", "type", "bridge")
	run(t, "ip", "-n", l.sw, "link", "set", "br0", "up")
	host, peer := "tlbh"+l.sfx, "tlbhp"+l.sfx
	run(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer)
	run(t, "ip", "link", "set", peer, "netns", l.sw)
	run(t, "ip", "-n", l.sw, "link", "set", peer, "master", "br0")
	run(t, "ip", "-n", l.sw, "link", "set", peer, "up")
	run(t, "ip", "addr", "add", l.subnet+".1/24", "dev", host)
	run(t, "ip", "link", "set", host, "up")
	return l
}

// node creates namespace i with address <subnet>.(10+i) and returns it.
func (l *netLab) node(i int) (ns, ip string) {
	t := l.t
	ns, ip = fmt.Sprintf("tlb%sn%d", l.sfx, i), fmt.Sprintf("%s.%d", l.subnet, 10+i)
	run(t, "ip", "netns", "add", ns)
	l.mu.Lock()
	l.nodes = append(l.nodes, ns)
	l.mu.Unlock()
	v, p := fmt.Sprintf("tlb%sv%d", l.sfx, i), fmt.Sprintf("tlb%sp%d", l.sfx, i)
	run(t, "ip", "-n", l.sw, "link", "add", v, "type", "veth", "peer", "name", p)
	run(t, "ip", "-n", l.sw, "link", "set", p, "netns", ns)
	run(t, "ip", "-n", l.sw, "link", "set", v, "master", "br0")
	run(t, "ip", "-n", l.sw, "link", "set", v, "up")
	run(t, "ip", "-n", ns, "addr", "add", ip+"/24", "dev", p)
	run(t, "ip", "-n", ns, "link", "set", p, "up")
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	return ns, ip
}

// start runs bin with args inside ns, its output in log.
func (l *netLab) start(ns, log string, bin string, args ...string) {
	t := l.t
	f, err := os.Create(log)
	require.NoError(t, err)
	defer f.Close()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, bin}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	require.NoError(t, cmd.Start())
	l.mu.Lock()
	l.procs = append(l.procs, cmd)
	l.mu.Unlock()
}

// cut blackholes traffic between every address of a and every one of b.
func (l *netLab) cut(a, b map[string]string, add bool) {
	op := "add"
	if !add {
		op = "del"
	}
	for nsA, ipA := range a {
		for nsB, ipB := range b {
			run(l.t, "ip", "-n", nsA, "route", op, "blackhole", ipB+"/32")
			run(l.t, "ip", "-n", nsB, "route", op, "blackhole", ipA+"/32")
		}
	}
}

func (l *netLab) cleanup() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.procs {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	// ip netns exec leaves the server as its own child after exec: kill
	// whatever still runs in our namespaces.
	for _, ns := range l.nodes {
		if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
			for _, pid := range strings.Fields(string(out)) {
				_ = exec.Command("kill", "-9", pid).Run()
			}
		}
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
	_ = exec.Command("ip", "link", "del", "tlbh"+l.sfx).Run()
	_ = exec.Command("ip", "netns", "del", l.sw).Run()
}

// TestPartitionMinorityPrimary (row 21): the primary and one sentinel are
// cut from the replica and two sentinels while the limiter still reaches
// the primary; the majority promotes the replica; the partition heals and
// the old primary becomes a replica, dropping what it accepted alone.
// Measured: acknowledged admissions lost (admitted − what the new primary
// holds), without and with REPLICATION_ACKS=1; with acks they are 0.
func TestPartitionMinorityPrimary(t *testing.T) {
	for _, acks := range []int{0, 1} {
		t.Run(fmt.Sprintf("acks=%d", acks), func(t *testing.T) { partitionRun(t, acks) })
	}
}

func partitionRun(t *testing.T, acks int) {
	lab := newNetLab(t)
	dir := t.TempDir()
	redisBin, err := exec.LookPath("redis-server")
	require.NoError(t, err)
	sentinelBin, err := exec.LookPath("redis-sentinel")
	require.NoError(t, err)

	nsP, ipP := lab.node(0)
	nsR, ipR := lab.node(1)
	server := func(ns, ip string, extra ...string) {
		args := append([]string{"--bind", ip, "--port", "6379", "--save", "", "--appendonly", "no",
			"--protected-mode", "no", "--dir", dir, "--dbfilename", ns + ".rdb", "--repl-diskless-sync-delay", "0"}, extra...)
		lab.start(ns, filepath.Join(dir, ns+".log"), redisBin, args...)
	}
	server(nsP, ipP)
	server(nsR, ipR, "--replicaof", ipP, "6379")
	admin := func(ip string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(ip, "6379"), MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	p, r := admin(ipP), admin(ipR)
	waitFor(t, "replica in sync", 15*time.Second, func() error {
		repl, err := rediscluster.Replication(context.Background(), r)
		if err != nil {
			return err
		}
		if !repl.LinkUp {
			return errors.New("replica link not up")
		}
		return nil
	})

	var sentinelAddrs []string
	sentinelNS := map[int]string{}
	sentinelIP := map[int]string{}
	for i := 2; i <= 4; i++ {
		ns, ip := lab.node(i)
		sentinelNS[i], sentinelIP[i] = ns, ip
		conf := filepath.Join(dir, ns+".conf")
		require.NoError(t, os.WriteFile(conf, []byte(strings.Join([]string{
			"bind " + ip, "port 26379", "protected-mode no", "dir " + dir,
			"sentinel resolve-hostnames no",
			"sentinel monitor mymaster " + ipP + " 6379 2",
			"sentinel down-after-milliseconds mymaster 1000",
			"sentinel failover-timeout mymaster 5000", "",
		}, "\n")), 0o600))
		lab.start(ns, filepath.Join(dir, ns+".log"), sentinelBin, conf)
	}
	// The majority's sentinels first: go-redis asks them in order.
	sentinelAddrs = []string{sentinelIP[3] + ":26379", sentinelIP[4] + ":26379", sentinelIP[2] + ":26379"}
	sentinel := redis.NewSentinelClient(&redis.Options{Addr: sentinelAddrs[0], MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = sentinel.Close() })
	waitFor(t, "sentinels agree", 30*time.Second, func() error {
		for _, a := range sentinelAddrs {
			s := redis.NewSentinelClient(&redis.Options{Addr: a, MaxRetries: -1, DialerRetries: 1})
			m, err := s.Master(context.Background(), "mymaster").Result()
			_ = s.Close()
			if err != nil || m["num-other-sentinels"] != "2" || m["num-slaves"] != "1" {
				return fmt.Errorf("sentinel %s: %v %v", a, m, err)
			}
		}
		return nil
	})

	keys := randomKeys(t)
	pol := mustPolicy(t, "partition", ratelimit.FixedWindow{Limit: 1_000_000, Window: time.Hour}, 1)
	cfg := redisrate.ClientConfig{Protocol: redisrate.ProtocolRESP2, CommandTimeout: 500 * time.Millisecond,
		DialTimeout: 500 * time.Millisecond, PoolSize: 8, PoolTimeout: 200 * time.Millisecond}
	fc, err := redisrate.NewFailoverClient(cfg, redisrate.SentinelConfig{MasterName: "mymaster", Addrs: sentinelAddrs})
	require.NoError(t, err)
	opts := redisrate.Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize}
	if acks > 0 {
		opts.ReplicationAcks, opts.ReplicationAckTimeout = acks, 100*time.Millisecond
	}
	prov, err := redisrate.New(fc, keys, []ratelimit.Policy{pol}, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, prov.Start(ctx))
	subject := randomSubject(t)

	admitted, shortfall, failed := 0, 0, 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 20000; i++ { // bounded; stop ends it first
			select {
			case <-stop:
				return
			default:
			}
			switch o := ask(prov, pol.ID(), subject, 1).(type) {
			case ratelimit.Evaluated:
				if o.Decision.Allowed {
					admitted++
				}
			case ratelimit.Indeterminate:
				if o.Category == ratelimit.CategoryReplication {
					shortfall++
				} else {
					failed++
				}
			default:
				failed++
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(500 * time.Millisecond)

	minority := map[string]string{nsP: ipP, sentinelNS[2]: sentinelIP[2]}
	majority := map[string]string{nsR: ipR, sentinelNS[3]: sentinelIP[3], sentinelNS[4]: sentinelIP[4]}
	lab.cut(minority, majority, true)
	waitFor(t, "the majority promotes the replica", 30*time.Second, func() error {
		addr, err := sentinel.GetMasterAddrByName(context.Background(), "mymaster").Result()
		if err != nil || addr[0] != ipR {
			return fmt.Errorf("master %v %v", addr, err)
		}
		return nil
	})
	time.Sleep(700 * time.Millisecond) // the limiter follows +switch-master
	lab.cut(minority, majority, false)
	waitFor(t, "the old primary rejoins as a replica", 40*time.Second, func() error {
		repl, err := rediscluster.Replication(context.Background(), p)
		if err != nil {
			return err
		}
		if repl.Role != redisinfo.RoleReplica || !repl.LinkUp {
			return fmt.Errorf("old primary: role %s, link up %v", repl.Role, repl.LinkUp)
		}
		return nil
	})
	close(stop)
	<-done

	held, _ := consumed(t, r, keys, pol, subject)
	lost := int64(admitted) - held
	t.Logf("partition (acks=%d): %d admitted, %d Indeterminate{replication}, %d other failures; the new primary holds %d; acknowledged admissions lost: %d",
		acks, admitted, shortfall, failed, held, max(lost, 0))
	require.LessOrEqual(t, held, int64(admitted+shortfall+failed), "nothing applied twice")
	if acks > 0 {
		require.LessOrEqual(t, int64(admitted), held, "with REPLICATION_ACKS=1 no acknowledged admission is lost")
	}
}
