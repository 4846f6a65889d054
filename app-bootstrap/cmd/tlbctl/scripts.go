package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// sentProgram is one program the service sends, and the policy it was
// rendered for.
type sentProgram struct {
	policy string
	prog   programs.Program
}

// sentPrograms lists, in policy file order and without repeating a
// digest, every program the service sends for the configured policies:
// each policy's bundle (programs.ForPolicy, rendered with its parameters
// as constants, ADR 0035) and, when the file forms a policy set (two or
// more enforced policies on one route pattern, ADR 0027; a shadow policy
// never joins one, ADR 0037), the set program.
func sentPrograms(cfg config.Config) ([]sentProgram, error) {
	var out []sentProgram
	seen := map[string]bool{}
	add := func(policy string, p programs.Program) {
		if !seen[p.SHA1] {
			seen[p.SHA1] = true
			out = append(out, sentProgram{policy, p})
		}
	}
	set := cfg.RateLimit.Policies
	for _, pol := range set.Policies {
		b, err := programs.ForPolicy(pol)
		if err != nil {
			return nil, fmt.Errorf("policy %q: %w", pol.ID(), err)
		}
		for _, p := range b.Programs() {
			add(string(pol.ID()), p)
		}
	}
	perPattern := map[string]int{}
	for _, r := range set.Routes {
		if pol, ok := set.Policy(r.Policy); ok && pol.Shadow() {
			continue // never a set member (ADR 0037)
		}
		perPattern[r.Pattern]++
		if perPattern[r.Pattern] == 2 {
			add("(set)", programs.SetProgram())
		}
	}
	return out, nil
}

// scriptsRow loads, with SCRIPT LOAD, every program the service sends for
// the configured policies (sentPrograms) and requires the server to name
// each by the SHA1 the service sends with EVALSHA.
func scriptsRow(ctx context.Context, cfg config.Config, c *redis.Client) row {
	sent, err := sentPrograms(cfg)
	if err != nil {
		return row{"scripts", statusProblem, err.Error()}
	}
	loaded := make([]string, 0, len(sent))
	for _, s := range sent {
		sha, err := c.ScriptLoad(ctx, s.prog.Source).Result()
		if err != nil {
			return row{"scripts", statusProblem, fmt.Sprintf("SCRIPT LOAD %s of policy %s: %v", s.prog.Name, s.policy, err)}
		}
		if sha != s.prog.SHA1 {
			return row{"scripts", statusProblem, fmt.Sprintf("%s of policy %s loaded as %s, the service sends %s", s.prog.Name, s.policy, bounded(sha), s.prog.SHA1)}
		}
		loaded = append(loaded, s.policy+" "+s.prog.Name+" "+s.prog.SHA1[:12])
	}
	return row{"scripts", statusOK, fmt.Sprintf("loaded the %d programs the service sends for %d policies: %s", len(loaded), len(cfg.RateLimit.Policies.Policies), strings.Join(loaded, ", "))}
}
