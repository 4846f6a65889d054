package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rateplan"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The subcommands of tlbctl plan (issue 36).
const (
	planSet   = "set"
	planGet   = "get"
	planUnset = "unset"
	planList  = "list"
)

// planCommand is what one tlbctl plan invocation asked for, validated.
type planCommand struct {
	sub        string // planSet, planGet, planUnset or planList
	name       string // "plan <sub>", for messages
	plan       ratelimit.PlanID
	in         subjectInput // not for list
	useService bool
	yes        bool
	auditPath  string
}

// runPlan runs tlbctl plan set|get|unset|list. As for inspect and reset,
// every input is validated, the subject derived and the audit log opened
// before the first connection; a policy file without plans and an unknown
// --plan are bad input (exit 2).
func runPlan(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	// Before the subcommand is read: "plan --api-key K" must not reach
	// the unknown-subcommand message with the key in it.
	cmd := "plan"
	if len(args) > 0 && slices.Contains([]string{planSet, planGet, planUnset, planList}, args[0]) {
		cmd += " " + args[0]
	}
	if err := refuseArgvAPIKey(cmd, args); err != nil {
		return err
	}
	pc, err := parsePlanCommand(args)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(environ)
	if err != nil {
		return err
	}
	set := cfg.RateLimit.Policies
	plans := set.Plans
	if plans.IsZero() {
		return usagef("%s: the policy file %s has no plans (a file gives \"plans\" and \"defaultPlan\" to have them, docs/operations.md \"tlbctl plan\")", pc.name, cfg.RateLimit.PoliciesSource)
	}
	if pc.plan != "" && !plans.Has(pc.plan) {
		return usagef("%s: --plan %q: unknown plan (the policy file %s has plans: %s)", pc.name, bounded(string(pc.plan)), cfg.RateLimit.PoliciesSource, joinPlans(plans.IDs()))
	}
	keys, err := keyspace.NewBuilder(cfg.RateLimit.KeyPrefix, cfg.RateLimit.KeySecret)
	if err != nil {
		return usagef("%sRATE_LIMIT_KEY_SECRET: %v", config.Prefix, err)
	}
	var (
		tg       target
		warnings []string
		akey     string
	)
	if pc.sub != planList {
		if len(set.Policies) == 0 {
			return usagef("%s: the policy file %s has no policies", pc.name, cfg.RateLimit.PoliciesSource)
		}
		// resolve derives the subject (identity, digest) exactly as
		// inspect does; the state key it derives for the file's first
		// policy is not used: an assignment belongs to the subject.
		if tg, warnings, err = resolve(cfg, set.Policies[0].ID(), pc.in, stdin); err != nil {
			return err
		}
		if akey, err = rateplan.Key(keys, tg.digest); err != nil {
			return err
		}
	}
	ss, err := openSession(cfg, environ, pc.useService, pc.yes, pc.auditPath, warnings, stderr)
	if err != nil {
		return err
	}
	defer ss.close()
	client, user, where, audit := ss.client, ss.user, ss.where, ss.audit
	store, err := rateplan.NewStore(client, keys, plans, set.Policies)
	if err != nil {
		return err
	}
	op := planOp{store: store, client: client, set: set, keys: keys, tg: tg, akey: akey, stdout: stdout}
	switch pc.sub {
	case planGet:
		err = op.get(ctx)
	case planList:
		err = op.list(ctx, pc.plan)
	default:
		err = op.change(ctx, pc, auditInfo{user: user, endpoint: where}, audit)
	}
	var ue usageError
	if err != nil && !errors.As(err, &ue) {
		return fmt.Errorf("%s as %s: %w", where, user, err)
	}
	return err
}

// parsePlanCommand reads the subcommand and its flags; every error is a
// usageError. The subject flags and their refusals are inspect's.
func parsePlanCommand(args []string) (planCommand, error) {
	if len(args) == 0 {
		return planCommand{}, usagef("plan: want a subcommand: set, get, unset or list")
	}
	pc := planCommand{sub: args[0], name: "plan " + args[0]}
	switch pc.sub {
	case planSet, planGet, planUnset, planList:
	default:
		return planCommand{}, usagef("plan: unknown subcommand %q (want set, get, unset or list)", bounded(pc.sub))
	}
	fs := flag.NewFlagSet(pc.name, flag.ContinueOnError)
	var planID string
	if pc.sub == planSet || pc.sub == planList {
		fs.StringVar(&planID, "plan", "", "plan ID")
	}
	if pc.sub != planList {
		fs.StringVar(&pc.in.apiKeyFile, "api-key-file", "", "file holding the client's API key (- for standard input)")
		fs.StringVar(&pc.in.principal, "principal", "", "the trusted-header principal")
		fs.StringVar(&pc.in.ip, "ip", "", "the client's IP address")
	}
	if pc.sub == planSet || pc.sub == planUnset {
		fs.BoolVar(&pc.yes, "yes", false, "really change")
		fs.StringVar(&pc.auditPath, "audit-log", "", "append the audit line to this file too")
	}
	fs.BoolVar(&pc.useService, flagUseServiceCredentials, false, "connect as the service's ACL user")
	if err := parseFlags(fs, args[1:]); err != nil {
		return planCommand{}, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	pc.plan = ratelimit.PlanID(planID)
	switch {
	case pc.sub == planSet && planID == "":
		return planCommand{}, usagef("%s: --plan is required", pc.name)
	case given["plan"] && planID == "":
		return planCommand{}, usagef("%s: --plan: want a plan ID", pc.name)
	case given["audit-log"] && pc.auditPath == "":
		return planCommand{}, usagef("%s: --audit-log: want a file name", pc.name)
	}
	if pc.sub == planList {
		return pc, nil
	}
	var kinds []string
	for _, k := range []string{kindAPIKey + "-file", kindPrincipal, kindIP} {
		if given[k] {
			kinds = append(kinds, strings.TrimSuffix(k, "-file"))
		}
	}
	if len(kinds) != 1 {
		return planCommand{}, usagef("%s: give exactly one of --api-key-file, --principal and --ip", pc.name)
	}
	pc.in.kind = kinds[0]
	return pc, nil
}

// planOp is one plan command's store and subject (none for list).
type planOp struct {
	store  *rateplan.Store
	client redis.UniversalClient // for preview's reads of the states
	set    config.PolicySet
	keys   *keyspace.Builder
	tg     target // its policy and key are not the subject's plan's
	akey   string
	stdout io.Writer
}

// get prints the subject's stored plan, its effective plan and, per base
// policy, the policy that decides it.
func (o planOp) get(ctx context.Context) error {
	a, ok, err := o.store.Get(ctx, o.tg.digest)
	if err != nil {
		return err
	}
	plans := o.set.Plans
	w := o.stdout
	fmt.Fprintf(w, "subject     %s %s\n", o.tg.kind, o.tg.shown)
	fmt.Fprintf(w, "key         %s\n", o.akey)
	switch {
	case !ok:
		fmt.Fprintf(w, "stored      none (no assignment)\n")
	case !plans.Has(a.Plan):
		fmt.Fprintf(w, "stored      %s (set at %s; the policy file has no such plan)\n", a.Plan, formatAt(a.At))
	default:
		fmt.Fprintf(w, "stored      %s (set at %s)\n", a.Plan, formatAt(a.At))
	}
	eff := plans.Effective(a.Plan)
	if ok && eff == a.Plan {
		fmt.Fprintf(w, "effective   %s\n", eff)
	} else {
		fmt.Fprintf(w, "effective   %s (the default plan)\n", eff)
	}
	for _, base := range plans.Bases() {
		fmt.Fprintf(w, "base        %s decided by %s\n", base, plans.Resolve(eff, base))
	}
	return nil
}

// change runs set or unset: with --yes through Store.Set or Store.Unset
// (the carry transaction, then the invalidation), printing what it
// returned and writing the audit line; without, it says what would change
// and changes nothing.
func (o planOp) change(ctx context.Context, pc planCommand, who auditInfo, audit io.Writer) error {
	plans := o.set.Plans
	a, assigned, err := o.store.Get(ctx, o.tg.digest)
	if err != nil {
		return err
	}
	stored := "none"
	if assigned {
		stored = string(a.Plan)
	}
	subj := fmt.Sprintf("%s %s", o.tg.kind, o.tg.shown)
	switch {
	case pc.sub == planSet && assigned && a.Plan == pc.plan:
		fmt.Fprintf(o.stdout, "nothing to change: the plan of %s is already %s (key %s)\n", subj, pc.plan, o.akey)
		return nil
	case pc.sub == planUnset && !assigned:
		fmt.Fprintf(o.stdout, "nothing to unset: %s has no assignment, it is on the default plan %s (key %s)\n", subj, plans.Default(), o.akey)
		return nil
	}
	from, to := plans.Effective(a.Plan), plans.Effective(pc.plan)
	if !pc.yes {
		if pc.sub == planSet {
			fmt.Fprintf(o.stdout, "would set the plan of %s to %s (stored now: %s; effective %s -> %s): key %s\n", subj, pc.plan, stored, from, to, o.akey)
		} else {
			fmt.Fprintf(o.stdout, "would unset the plan of %s (stored now: %s; effective %s -> %s, the default plan): key %s\n", subj, stored, from, to, o.akey)
		}
		if err := o.preview(ctx, pc.plan); err != nil {
			return err
		}
		fmt.Fprintf(o.stdout, "run again with --yes to %s it\n", pc.sub)
		return nil
	}
	var change rateplan.Change
	if pc.sub == planSet {
		change, err = o.store.Set(ctx, o.tg.digest, pc.plan)
	} else {
		change, err = o.store.Unset(ctx, o.tg.digest)
	}
	// Only an error wrapping ErrNotPublished follows a committed change.
	if err != nil && !errors.Is(err, rateplan.ErrNotPublished) {
		if errors.Is(err, rateplan.ErrUnknownPlan) {
			return usagef("%s: %v", pc.name, err)
		}
		return err
	}
	if pc.sub == planSet {
		fmt.Fprintf(o.stdout, "set the plan of %s to %s (was stored: %s; effective %s -> %s): key %s\n", subj, pc.plan, stored, change.From, change.To, o.akey)
	} else {
		fmt.Fprintf(o.stdout, "unset the plan of %s (was stored: %s; effective %s -> %s, the default plan): key %s\n", subj, stored, change.From, change.To, o.akey)
	}
	for _, m := range change.Moves {
		fmt.Fprintf(o.stdout, "moved       base %s: %s -> %s, consumed %d, carried %d\n", m.Base, m.From, m.To, m.Consumed, m.Carried)
	}
	if len(change.Moves) == 0 {
		fmt.Fprintf(o.stdout, "moved       nothing: no base policy changes the policy that decides it\n")
	}
	after := string(pc.plan)
	if pc.sub == planUnset {
		after = "none"
	}
	writePlanAudit(audit, who, "tlbctl "+pc.name, o.tg, o.akey, stored, after, change)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "invalidation published on %s: %d subscribed instance connection(s) received it\n", ratedenial.Channel, change.Published)
	return nil
}

// preview prints what Store.Preview says the change from plan from to
// plan to would move: for each base policy whose deciding policy would
// change, what the subject has consumed under the old one now and what the
// new one would hold (Store.Set recomputes it in its transaction). It
// writes nothing.
func (o planOp) preview(ctx context.Context, to ratelimit.PlanID) error {
	change, err := o.store.Preview(ctx, o.tg.digest, to)
	if err != nil {
		return err
	}
	for _, m := range change.Moves {
		pf, _ := o.set.Policy(m.From)
		pt, _ := o.set.Policy(m.To)
		fmt.Fprintf(o.stdout, "would move  base %s: %s -> %s, consumed now %d of %d, would carry %d of %d\n", m.Base, m.From, m.To, m.Consumed, pf.Limit(), m.Carried, pt.Limit())
	}
	if len(change.Moves) == 0 {
		fmt.Fprintf(o.stdout, "would move  nothing: no base policy changes the policy that decides it\n")
	}
	return nil
}

// list prints one line per assignment (its key, which names no subject,
// its plan and when it was set), then the count per plan; with plan, only
// that plan's assignments.
func (o planOp) list(ctx context.Context, plan ratelimit.PlanID) error {
	plans := o.set.Plans
	var mu sync.Mutex // Store.List calls back concurrently in cluster mode
	counts := map[ratelimit.PlanID]int{}
	total := 0
	err := o.store.List(ctx, func(key string, a rateplan.Assignment) error {
		if plan != "" && a.Plan != plan {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		counts[a.Plan]++
		total++
		if plans.Has(a.Plan) {
			fmt.Fprintf(o.stdout, "%s %s %s\n", key, a.Plan, formatAt(a.At))
		} else {
			fmt.Fprintf(o.stdout, "%s %s %s (the policy file has no such plan: on the default plan %s)\n", key, a.Plan, formatAt(a.At), plans.Default())
		}
		return nil
	})
	if err != nil {
		return err
	}
	ids := plans.IDs()
	if plan != "" {
		ids = []ratelimit.PlanID{plan}
	}
	for _, id := range ids {
		note := ""
		if id == plans.Default() {
			note = " (the default plan: subjects without an assignment are on it too, and are not counted)"
		}
		fmt.Fprintf(o.stdout, "plan %s: %d assignment(s)%s\n", id, counts[id], note)
		delete(counts, id)
	}
	for id, n := range counts { // plans the file no longer has
		fmt.Fprintf(o.stdout, "plan %s: %d assignment(s) (the policy file has no such plan)\n", id, n)
	}
	fmt.Fprintf(o.stdout, "%d assignment(s) in all\n", total)
	return nil
}

// formatAt shows an assignment's set-at time.
func formatAt(at time.Time) string {
	if at.IsZero() {
		return "unknown"
	}
	return at.UTC().Format(time.RFC3339Nano)
}

// joinPlans joins plan IDs for a message.
func joinPlans(ids []ratelimit.PlanID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return strings.Join(s, ", ")
}
