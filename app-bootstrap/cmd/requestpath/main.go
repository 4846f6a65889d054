package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.uber.org/fx"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/wiring"
)

// modulePrefix is the import path prefix of this repository's packages;
// it is cut from the reported file names.
const modulePrefix = "github.com/tech-log/tech-log-backend/"

// self is this command's own directory, whose files never count.
const self = "app-bootstrap/cmd/requestpath/"

// Windows is how many measured requests a file must run in to count.
const Windows = 3

func main() {
	root := flag.String("root", ".", "repository root (examples/policies.json is read below app-bootstrap)")
	doc := flag.String("doc", "", "markdown file whose **[n]**-marked paths must equal the measured files (empty: only print)")
	flag.Parse()
	files, err := measure(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "requestpath:", err)
		os.Exit(1)
	}
	fmt.Printf("one admitted request ran in %d Go files:\n", len(files))
	for _, f := range files {
		fmt.Println("  " + f)
	}
	if *doc == "" {
		return
	}
	listed, err := markedFiles(*doc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "requestpath:", err)
		os.Exit(1)
	}
	missing, extra := diff(files, listed)
	for _, f := range missing {
		fmt.Fprintf(os.Stderr, "requestpath: %s ran but %s does not mark it **[n]**\n", f, *doc)
	}
	for _, f := range extra {
		fmt.Fprintf(os.Stderr, "requestpath: %s marks %s, which did not run\n", *doc, f)
	}
	if len(missing)+len(extra) > 0 {
		os.Exit(1)
	}
	fmt.Printf("%s lists exactly these files\n", *doc)
}

// measure starts Redis and the service, and returns the sorted files (from
// the repository root) that ran in each of Windows admitted requests.
func measure(root string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "requestpath-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	rs, err := redisserver.Launch(ctx, redisserver.Config{Dir: dir})
	if err != nil {
		return nil, err
	}
	defer rs.Kill()
	cfg, err := config.Load(map[string]string{
		"APP_WEB_ADDR":                  "127.0.0.1:0",
		"APP_RATE_LIMIT_ENABLED":        "true",
		"APP_RATE_LIMIT_PROVIDER":       "redis",
		"APP_RATE_LIMIT_REDIS_ADDR":     rs.Addr(),
		"APP_RATE_LIMIT_POLICIES_FILE":  filepath.Join(root, "app-bootstrap", "examples", "policies.json"),
		"APP_RATE_LIMIT_DEFAULT_POLICY": "api",
		// Made-up secrets for a private server that lives for this run.
		"APP_RATE_LIMIT_KEY_SECRET": "requestpath-key-secret-0123456789abcdefghij",
		"APP_WEB_SUBJECT_SECRET":    "requestpath-subject-secret-0123456789abcdef",
	})
	if err != nil {
		return nil, err
	}
	var srv *wiring.Server
	app := fx.New(wiring.Options(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))), fx.Populate(&srv))
	if err := app.Start(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = app.Stop(context.Background()) }()
	get := pinger(ctx, "http://"+srv.Addr()+wiring.PathPing)
	for range 3 { // warm-up: script load, pools, first-use paths
		if err := get(); err != nil {
			return nil, err
		}
	}
	var common map[string]bool
	for w := range Windows {
		ran, err := window(ctx, filepath.Join(dir, fmt.Sprintf("w%d", w)), get)
		if err != nil {
			return nil, err
		}
		if common == nil {
			common = ran
			continue
		}
		for f := range common {
			if !ran[f] {
				delete(common, f)
			}
		}
	}
	var files []string
	for f := range common {
		files = append(files, f)
	}
	sort.Strings(files)
	return files, nil
}

// pinger returns a function that sends one GET to url on a new connection
// and fails unless it is answered 200 (admitted).
func pinger(ctx context.Context, url string) func() error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	return func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s, want 200 (admitted)", url, resp.Status)
		}
		return nil
	}
}

// diff returns the files in ran but not in listed, and in listed but not ran.
func diff(ran, listed []string) (missing, extra []string) {
	in := func(set []string, f string) bool {
		i := sort.SearchStrings(set, f)
		return i < len(set) && set[i] == f
	}
	for _, f := range ran {
		if !in(listed, f) {
			missing = append(missing, f)
		}
	}
	for _, f := range listed {
		if !in(ran, f) {
			extra = append(extra, f)
		}
	}
	return missing, extra
}

var errNoCoverage = errors.New("built without coverage: go build -cover -covermode=atomic -coverpkg=" + modulePrefix + "... (make request-path)")

// trim turns a coverage file name (import path + file) into a path from
// the repository root, and says whether it counts.
func trim(name string) (string, bool) {
	rel, ok := strings.CutPrefix(name, modulePrefix)
	if !ok || strings.HasPrefix(rel, self) || strings.HasSuffix(rel, "_test.go") {
		return "", false
	}
	return rel, true
}
