package wiring

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// observabilityDir holds the Grafana dashboard and the Prometheus rules.
const observabilityDir = "../../deploy/observability"

var (
	// metricRef is a service metric name in a PromQL expression.
	metricRef = regexp.MustCompile(`\btlb_[a-z0-9_]+`)
	// selectorRef is a metric with a label selector; labelRef a key in it.
	selectorRef = regexp.MustCompile(`\b(tlb_[a-z0-9_]+)\{([^}]*)\}`)
	labelRef    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	// sampleLine is one sample of the exposition format: name{labels} value.
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? `)
)

// targetLabels are added by Prometheus (job, instance) or by
// histogram_quantile's input (le is on the exposition's _bucket lines).
var targetLabels = map[string]bool{"job": true, "instance": true}

// TestObservabilityMetricsExist: every tlb_ metric name the dashboard and the
// alert rules use exists in the running service's /metrics, and every label
// they select on exists on that metric. The service runs in-process with the
// Redis limiter on (a private redis-server), a shadow policy beside the
// enforced one and plans (testdata/observability-policies.json) and the
// local limiter on, and
// gets one admitted request, a local-limiter 429 and a /readyz probe so that
// every labelled series they use has appeared.
func TestObservabilityMetricsExist(t *testing.T) {
	exprs := observabilityExprs(t)
	require.NotEmpty(t, exprs)

	rs := redistest.Start(t)
	kv := append(enabledKV(rs.Addr()),
		"APP_WEB_LOCAL_LIMIT_ENABLED", "true", "APP_WEB_LOCAL_LIMIT_BURST", "2",
		"APP_WEB_LOCAL_LIMIT_RATE", "0.1", "APP_WEB_LOCAL_LIMIT_IDLE_TTL", "1m",
		// A shadow policy beside "api" and plans mapping it, so that the
		// shadow decisions' (ADR 0037) and plans' (ADR 0040) series exist
		// too.
		"APP_RATE_LIMIT_POLICIES_FILE", "testdata/observability-policies.json")
	cfg := loadConfig(t, kv...)
	var srv *Server
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv))
	app.RequireStart()
	t.Cleanup(app.RequireStop)

	base := "http://" + srv.Addr()
	want := []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests}
	for i, code := range want {
		resp, body := do(t, http.MethodGet, base+PathPing)
		require.Equal(t, code, resp.StatusCode, "request %d: %s", i, body)
	}
	resp, body := do(t, http.MethodGet, base+PathReadyz)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = do(t, http.MethodGet, base+PathMetrics)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	labels := exposedLabels(body)
	assert.Contains(t, body, "\ntlb_ready 1\n", "/readyz passed")
	assert.Contains(t, body, "\ntlb_ratelimit_max_in_flight 64\n", "the configured bound")

	used := map[string]bool{}
	for _, e := range exprs {
		for _, name := range metricRef.FindAllString(e.expr, -1) {
			used[name] = true
			_, ok := labels[name]
			assert.True(t, ok, "%s uses %s, which the service's /metrics does not have", e.where, name)
		}
		for _, m := range selectorRef.FindAllStringSubmatch(e.expr, -1) {
			for _, l := range labelRef.FindAllStringSubmatch(m[2], -1) {
				if targetLabels[l[1]] {
					continue
				}
				assert.True(t, labels[m[1]][l[1]], "%s selects %s on %s, which has no such label", e.where, l[1], m[1])
			}
		}
	}
	// The files cover what issue 15 asks for.
	for _, name := range []string{"tlb_ratelimit_outcomes_total", "tlb_ratelimit_evaluation_seconds_bucket",
		"tlb_ratelimit_in_flight", "tlb_ratelimit_max_in_flight", "tlb_ready",
		"tlb_ratelimit_breaker_state", "tlb_ratelimit_breaker_trips_total"} {
		assert.True(t, used[name], "no expression uses %s", name)
	}
}

// TestObservabilityPromtool runs `promtool check rules` and the rule unit
// tests (`promtool test rules alerts_test.yaml`) when promtool is on PATH
// (Debian package prometheus; .ci/run makes sure it is).
func TestObservabilityPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH (apt-get install prometheus); .ci/run installs it")
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, promtool, args...)
		cmd.Dir = observabilityDir
		out, err := cmd.CombinedOutput()
		cancel()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

type located struct{ where, expr string }

// observabilityExprs returns every PromQL expression of the dashboard
// (targets and template queries) and of the alert rules.
func observabilityExprs(t *testing.T) []located {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(observabilityDir, "dashboard.json"))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash), "dashboard.json is JSON")
	var out []located
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, "panel %q has a target without expr", p.Title)
			out = append(out, located{"dashboard panel " + p.Title, tg.Expr})
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			out = append(out, located{"dashboard variable " + v.Name, q})
		}
	}
	// The rules file: every expr block. No YAML library is needed: an expr
	// is either one line or a "|" block of deeper-indented lines.
	rules, err := os.ReadFile(filepath.Join(observabilityDir, "alerts.yaml"))
	require.NoError(t, err)
	lines := strings.Split(string(rules), "\n")
	n := 0
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		rest, ok := strings.CutPrefix(trimmed, "expr:")
		if !ok {
			continue
		}
		n++
		expr := strings.TrimSpace(rest)
		if expr == "|" {
			indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
			var b strings.Builder
			for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " ")) > indent) {
				i++
				b.WriteString(lines[i] + "\n")
			}
			expr = b.String()
		}
		require.NotEmpty(t, strings.TrimSpace(expr), "alerts.yaml line %d: empty expr", i+1)
		out = append(out, located{"alerts.yaml rule " + strings.TrimSpace(strings.TrimPrefix(prevAlert(lines, i), "- alert:")), expr})
	}
	require.Equal(t, strings.Count(string(rules), "- alert:"), n, "one expr per alert")
	return out
}

// prevAlert is the nearest "- alert:" line at or above line i.
func prevAlert(lines []string, i int) string {
	for ; i >= 0; i-- {
		if s := strings.TrimSpace(lines[i]); strings.HasPrefix(s, "- alert:") {
			return s
		}
	}
	return "?"
}

// exposedLabels maps every sample name of an exposition to its label names.
func exposedLabels(body string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		set := out[m[1]]
		if set == nil {
			set = map[string]bool{}
			out[m[1]] = set
		}
		for _, pair := range strings.Split(m[2], ",") {
			if k, _, ok := strings.Cut(pair, "="); ok {
				set[k] = true
			}
		}
	}
	return out
}
