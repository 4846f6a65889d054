package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Subject kinds, as flags and messages name them.
const (
	kindAPIKey    = "api-key"
	kindPrincipal = "principal"
	kindIP        = "ip"
)

// principalHeader is the header tlbctl's TrustedHeader reads when the
// service has none configured (APP_WEB_IDENTITY is not trusted-header):
// the principal's identity does not depend on the header's name.
const principalHeader = "X-Authenticated-User"

// proxyPeer is the trusted proxy tlbctl's principal request comes from.
var proxyPeer = netip.MustParseAddr("127.0.0.1")

// target is one subject's state under one policy, as the operator named it.
type target struct {
	policy ratelimit.Policy
	kind   string // kindAPIKey, kindPrincipal or kindIP
	shown  string // the subject as printed on stdout: never the API key itself
	digest ratelimit.SubjectDigest
	key    string // the Redis key (holds no subject)
}

// subjectInput is what the operator named: one of the three.
type subjectInput struct {
	apiKeyFile string // "-": standard input
	principal  string
	ip         string
	kind       string
}

// runSubject runs inspect or reset. Every input is validated, and the
// audit log opened, before the first connection.
func runSubject(ctx context.Context, cmd string, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	policyID := fs.String("policy", "", "policy ID")
	var in subjectInput
	fs.StringVar(&in.apiKeyFile, "api-key-file", "", "file holding the client's API key (- for standard input)")
	fs.StringVar(&in.principal, "principal", "", "the trusted-header principal")
	fs.StringVar(&in.ip, "ip", "", "the client's IP address")
	useService := fs.Bool(flagUseServiceCredentials, false, "connect as the service's ACL user")
	yes, auditPath := false, ""
	if cmd == "reset" {
		fs.BoolVar(&yes, "yes", false, "really delete")
		fs.StringVar(&auditPath, "audit-log", "", "append the audit line to this file too")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var kinds []string
	for _, k := range []string{kindAPIKey + "-file", kindPrincipal, kindIP} {
		if set[k] {
			kinds = append(kinds, strings.TrimSuffix(k, "-file"))
		}
	}
	switch {
	case !set["policy"] || *policyID == "":
		return usagef("%s: --policy is required", cmd)
	case len(kinds) != 1:
		return usagef("%s: give exactly one of --api-key-file, --principal and --ip", cmd)
	case set["audit-log"] && auditPath == "":
		return usagef("%s: --audit-log: want a file name", cmd)
	}
	in.kind = kinds[0]
	cfg, err := loadConfig(environ)
	if err != nil {
		return err
	}
	tg, warnings, err := resolve(cfg, ratelimit.PolicyID(*policyID), in, stdin)
	if err != nil {
		return err
	}
	var audit io.Writer = stderr
	if yes && auditPath != "" {
		f, err := openAuditLog(auditPath)
		if err != nil {
			return err
		}
		defer f.Close()
		audit = io.MultiWriter(stderr, f)
	}
	client, user, err := connect(cfg, environ, *useService)
	if err != nil {
		return err
	}
	defer client.Close()
	for _, w := range warnings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", name, w)
	}
	where := endpoint(cfg.RateLimit)
	node, err := nodeFor(ctx, client, tg.key)
	if err != nil {
		return fmt.Errorf("%s as %s: %w", where, user, err)
	}
	st, err := read(ctx, node, tg)
	if err != nil {
		return fmt.Errorf("%s as %s: %w", where, user, err)
	}
	if cmd == "inspect" {
		printState(stdout, tg, st)
		return nil
	}
	if err := reset(ctx, node, auditInfo{user: user, endpoint: where}, tg, st, yes, stdout, audit); err != nil {
		return fmt.Errorf("%s as %s: %w", where, user, err)
	}
	return nil
}
