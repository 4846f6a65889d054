package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
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
	ss, err := openSession(cfg, environ, *useService, yes, auditPath, warnings, stderr)
	if err != nil {
		return err
	}
	defer ss.close()
	client, user, where, audit := ss.client, ss.user, ss.where, ss.audit
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

// session is what a command that touches Redis holds once its input has
// passed: the client (as tlbctl's user or, asked, the service's), the
// user and endpoint its errors name, and where its audit lines go.
type session struct {
	client      redis.UniversalClient
	user, where string
	audit       io.Writer
	closers     []func() error
}

// openSession opens the audit log when a change is confirmed (yes) and
// auditPath is given (before connecting, so a bad path changes nothing),
// connects, and prints the input's warnings to stderr.
func openSession(cfg config.Config, environ []string, useService, yes bool, auditPath string, warnings []string, stderr io.Writer) (session, error) {
	ss := session{audit: stderr}
	if yes && auditPath != "" {
		f, err := openAuditLog(auditPath)
		if err != nil {
			return session{}, err
		}
		ss.closers = append(ss.closers, f.Close)
		ss.audit = io.MultiWriter(stderr, f)
	}
	client, user, err := connect(cfg, environ, useService)
	if err != nil {
		ss.close()
		return session{}, err
	}
	ss.client, ss.user, ss.where = client, user, endpoint(cfg.RateLimit)
	ss.closers = append(ss.closers, client.Close)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", name, w)
	}
	return ss, nil
}

// close closes the client and the audit log.
func (ss session) close() {
	for i := len(ss.closers) - 1; i >= 0; i-- {
		_ = ss.closers[i]()
	}
}
