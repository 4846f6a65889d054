package wiring

import (
	"crypto/tls"
	"fmt"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// envRLSTLS prefixes the RLS listener's TLS variables.
const envRLSTLS = config.Prefix + "RLS_TLS_"

// CheckRLS builds, by the RLS adapter's rules, what config left to it of
// r (ADR 0036: config parses, the wiring builds): the gRPC listener's TLS
// configuration from APP_RLS_TLS_CERT_FILE, APP_RLS_TLS_KEY_FILE and
// APP_RLS_TLS_CLIENT_CA_FILE (nil: plaintext, or the service off), and
// the undecided answer of APP_RLS_UNDECIDED. Each problem is a
// *config.VarError naming its variable (config.ErrInvalid), as
// config.Load's are: the service and tlbctl check run it right after
// config.Load and report both alike.
func CheckRLS(r config.RLS) (*tls.Config, rls.Undecided, error) {
	if !r.Enabled() {
		return nil, 0, nil
	}
	undecided, err := rls.ParseUndecided(r.Undecided)
	if err != nil {
		return nil, 0, &config.VarError{Var: config.Prefix + "RLS_UNDECIDED", Err: fmt.Errorf("%w: %w", config.ErrUnsupported, err)}
	}
	if !r.TLS() {
		return nil, undecided, nil
	}
	cfg, err := rls.LoadTLS(r.TLSCertFile, r.TLSKeyFile, r.TLSClientCAFile)
	if err != nil {
		name := envRLSTLS + "CERT_FILE"
		if r.TLSClientCAFile != "" {
			if _, pair := tls.LoadX509KeyPair(r.TLSCertFile, r.TLSKeyFile); pair == nil {
				name = envRLSTLS + "CLIENT_CA_FILE" // the pair loads: the CA file is at fault
			}
		}
		return nil, 0, &config.VarError{Var: name, Err: fmt.Errorf("%w: %w", config.ErrInvalid, err)}
	}
	return cfg, undecided, nil
}
