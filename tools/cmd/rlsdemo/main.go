package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tech-log/tech-log-backend/tools/internal/envoyrls"
)

// The demo's configuration: limit requests per user per minute.
const (
	demoDomain = "demo"
	limit      = 5
	perUser    = 8
	window     = time.Minute
	// scriptBudget is the most the script may take; it starts in a window
	// with at least this much left.
	scriptBudget = 30 * time.Second
	httpTimeout  = 10 * time.Second
)

var demoYAML = fmt.Sprintf(`domain: %s
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: %d
  - key: free
    rate_limit:
      unlimited: true
`, demoDomain, limit)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rlsdemo:", err)
		os.Exit(1)
	}
}

// endpoints is the service the script talks to.
type endpoints struct {
	name     string
	grpcAddr string
	httpAddr string
}

func run(args []string, out io.Writer) (err error) {
	fs := flag.NewFlagSet("rlsdemo", flag.ContinueOnError)
	rootFlag := fs.String("root", "..", "repository root")
	reference := fs.Bool("reference", false, "run the script against envoyproxy/ratelimit's service_cmd instead of our service")
	if err := fs.Parse(args); err != nil {
		return err
	}
	root, err := filepath.Abs(*rootFlag)
	if err != nil {
		return fmt.Errorf("root: %w", err)
	}
	bins, err := envoyrls.FindBinaries(root)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	rs, err := envoyrls.StartRedis(ctx)
	if err != nil {
		return err
	}
	defer rs.Close()
	fmt.Fprintf(out, "redis-server on %s\n", rs.Addr)
	configs := map[string]string{"demo.yaml": demoYAML}
	var ep endpoints
	if *reference {
		ref, err := envoyrls.StartReference(ctx, envoyrls.ReferenceConfig{Bin: bins.Service, RedisAddr: rs.Addr, Configs: configs, StopIncrementWhenOverLimit: true})
		if err != nil {
			return err
		}
		defer ref.Close()
		ep = endpoints{name: "envoyproxy/ratelimit " + bins.Version, grpcAddr: ref.GRPCAddr, httpAddr: ref.HTTPAddr}
	} else {
		o, cleanup, startErr := startOurs(ctx, root, rs.Addr, configs, out)
		if startErr != nil {
			return startErr
		}
		defer func() {
			if err != nil {
				fmt.Fprintf(out, "its log:\n%s\n", o.LogTail())
			}
			cleanup()
		}()
		ep = endpoints{name: "tech-log-backend", grpcAddr: o.GRPCAddr, httpAddr: o.HTTPAddr}
	}
	fmt.Fprintf(out, "%s: gRPC %s, POST /json on %s; %d requests per user per minute (demo.yaml)\n", ep.name, ep.grpcAddr, ep.httpAddr, limit)
	return script(ctx, out, bins.Client, ep)
}

// startOurs builds our service into a temporary directory and starts it;
// cleanup stops it and removes the directory.
func startOurs(ctx context.Context, root, redisAddr string, configs map[string]string, out io.Writer) (*envoyrls.Ours, func(), error) {
	dir, err := os.MkdirTemp("", "tlb-rlsdemo-")
	if err != nil {
		return nil, nil, fmt.Errorf("temp dir: %w", err)
	}
	bin := filepath.Join(dir, "tech-log-backend")
	fmt.Fprintln(out, "building tech-log-backend")
	if err := envoyrls.BuildOurs(ctx, root, bin); err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	o, err := envoyrls.StartOurs(ctx, envoyrls.OursConfig{Bin: bin, RedisAddr: redisAddr, Configs: configs})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("our service with APP_RLS_ADDR: %w", err)
	}
	return o, func() { _ = o.Close(); _ = os.RemoveAll(dir) }, nil
}

// tally counts one subject's answers.
type tally struct {
	label    string
	sent     int
	admitted int
	denied   int
	limit    int // 0: unlimited
	due      int // denials due (sent beyond the limit, within the window)
}

func (t *tally) record(code rlsv3.RateLimitResponse_Code) {
	t.sent++
	if code == rlsv3.RateLimitResponse_OVER_LIMIT {
		t.denied++
	} else {
		t.admitted++
	}
}

// problems are the ways a tally breaks its limit.
func (t tally) problems() []string {
	var p []string
	if t.limit > 0 && t.admitted > t.limit {
		p = append(p, fmt.Sprintf("%s: %d admitted, beyond the limit of %d", t.label, t.admitted, t.limit))
	}
	if t.denied < t.due {
		p = append(p, fmt.Sprintf("%s: %d denied where %d were due", t.label, t.denied, t.due))
	}
	if t.limit == 0 && t.denied > 0 {
		p = append(p, fmt.Sprintf("%s: %d denied on an unlimited key", t.label, t.denied))
	}
	return p
}

func script(ctx context.Context, out io.Writer, clientBin string, ep endpoints) error {
	if err := envoyrls.AwaitWindow(ctx, window, scriptBudget); err != nil {
		return err
	}
	start := time.Now()
	run := suffix()
	alice, bob, free := "alice-"+run, "bob-"+run, "any-"+run
	viaCmd := func(key, value string) (rlsv3.RateLimitResponse_Code, error) {
		resp, err := envoyrls.RunClient(ctx, clientBin, ep.grpcAddr, demoDomain, envoyrls.D(key, value))
		return resp.GetOverallCode(), err
	}
	viaJSON := func(key, value string) (rlsv3.RateLimitResponse_Code, error) {
		resp, err := postJSON(ctx, ep.httpAddr, envoyrls.Request(demoDomain, envoyrls.D(key, value)))
		return resp.GetOverallCode(), err
	}
	a := &tally{label: "user=alice (client_cmd, then /json)", limit: limit}
	b := &tally{label: "user=bob (/json, then client_cmd)", limit: limit}
	f := &tally{label: "free=any (unlimited; client_cmd and /json)"}
	type phase struct {
		title string
		t     *tally
		key   string
		value string
		n     int
		send  func(key, value string) (rlsv3.RateLimitResponse_Code, error)
		via   string
	}
	phases := []phase{
		{"alice through client_cmd", a, "user", alice, perUser, viaCmd, "client_cmd"},
		{"bob through POST /json", b, "user", bob, perUser, viaJSON, "/json"},
		{"alice again, through /json: the same state", a, "user", alice, 2, viaJSON, "/json"},
		{"bob again, through client_cmd", b, "user", bob, 2, viaCmd, "client_cmd"},
		{"the unlimited key through both", f, "free", free, 3, viaCmd, "client_cmd"},
		{"", f, "free", free, 3, viaJSON, "/json"},
	}
	for _, ph := range phases {
		if ph.title != "" {
			fmt.Fprintf(out, "\n%s:\n", ph.title)
		}
		codes := make([]string, 0, ph.n)
		for range ph.n {
			code, err := ph.send(ph.key, ph.value)
			if err != nil {
				return fmt.Errorf("%s via %s: %w", ph.key, ph.via, err)
			}
			ph.t.record(code)
			codes = append(codes, code.String())
		}
		fmt.Fprintf(out, "  %-10s %s=%s: %s\n", ph.via, ph.key, ph.value, strings.Join(codes, " "))
	}
	if w := time.Since(start); w > scriptBudget {
		return fmt.Errorf("the script took %v, beyond its %v budget: a window may have ended in between; run again", w, scriptBudget)
	}
	a.due, b.due = a.sent-limit, b.sent-limit
	fmt.Fprintf(out, "\n%-44s %5s %9s %7s %6s %5s\n", "subject", "sent", "admitted", "denied", "limit", "due")
	var problems []string
	for _, t := range []*tally{a, b, f} {
		lim := "none"
		if t.limit > 0 {
			lim = fmt.Sprint(t.limit)
		}
		fmt.Fprintf(out, "%-44s %5d %9d %7d %6s %5d\n", t.label, t.sent, t.admitted, t.denied, lim, t.due)
		problems = append(problems, t.problems()...)
	}
	if len(problems) > 0 {
		return errors.New("the limits did not hold:\n  " + strings.Join(problems, "\n  "))
	}
	fmt.Fprintln(out, "\nthe limits held: nobody admitted beyond the limit, every due denial given, the unlimited key never denied")
	return nil
}

// postJSON sends req to POST /json on addr and decodes the answer.
func postJSON(ctx context.Context, addr string, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	body, err := protojson.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("post /json: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("post /json: %w", err)
	}
	// envoyproxy/ratelimit answers a denial with 429 and the same body.
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
		return nil, fmt.Errorf("post /json: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	out := &rlsv3.RateLimitResponse{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("%w: %w: %s", envoyrls.ErrNotJSON, err, strings.TrimSpace(string(b)))
	}
	return out, nil
}

func suffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
