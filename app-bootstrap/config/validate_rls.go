package config

import (
	"net"
	"os"
	"slices"
)

// RLSUndecided lists APP_RLS_UNDECIDED's values: fail closed (OVER_LIMIT,
// the default) or a gRPC UNAVAILABLE that leaves it to Envoy's failure
// mode. The wiring maps them to the RLS adapter's (its test pins the two
// lists equal).
var RLSUndecided = []string{"fail-closed", "error"}

// envRLSGroup prefixes the Envoy rate-limit service's variables.
const envRLSGroup = Prefix + "RLS_"

// RLS is the Envoy rate-limit service (docs/rls.md), APP_RLS_*. When Addr
// is "" it is off and every other field is left at its zero value.
type RLS struct {
	// Addr is the gRPC listener (APP_RLS_ADDR).
	Addr string
	// ConfigDir holds the envoyproxy/ratelimit YAML files
	// (APP_RLS_CONFIG_DIR), reloaded on change and SIGHUP.
	ConfigDir string
	// HTTPAddr is the POST /json and GET /healthcheck listener
	// (APP_RLS_HTTP_ADDR); "" is off.
	HTTPAddr string
	// Undecided is the answer to an undecided outcome (APP_RLS_UNDECIDED),
	// one of RLSUndecided.
	Undecided string
	// ShadowMode decides and counts every rule, never enforcing
	// (APP_RLS_SHADOW_MODE).
	ShadowMode bool
	// TLS settings as configured (file paths), paired as TLS needs them;
	// the wiring loads them (wiring.CheckRLS, ADR 0036). No cert file
	// means plaintext.
	TLSCertFile, TLSKeyFile, TLSClientCAFile string
}

// Enabled reports whether the service is on (APP_RLS_ADDR set).
func (r RLS) Enabled() bool { return r.Addr != "" }

// TLS reports whether the gRPC listener serves TLS (a cert and a key).
func (r RLS) TLS() bool { return r.TLSCertFile != "" }

type rawRLS struct {
	Addr            string `env:"ADDR"`
	ConfigDir       string `env:"CONFIG_DIR"`
	HTTPAddr        string `env:"HTTP_ADDR"`
	Undecided       string `env:"UNDECIDED" envDefault:"fail-closed"`
	ShadowMode      bool   `env:"SHADOW_MODE" envDefault:"false"`
	TLSCertFile     string `env:"TLS_CERT_FILE"`
	TLSKeyFile      string `env:"TLS_KEY_FILE"`
	TLSClientCAFile string `env:"TLS_CLIENT_CA_FILE"`
}

// rls validates the RLS section against the web listeners and the
// limiter it decides with.
func (v *errs) rls(r rawRLS, rl RateLimit, web rawWeb) RLS {
	const g = envRLSGroup
	if r.Addr == "" {
		if r.HTTPAddr != "" {
			v.add(g+"ADDR", ErrRequired, "%sHTTP_ADDR is set: the rate-limit service needs its gRPC listener", g)
		}
		return RLS{}
	}
	out := RLS{Addr: r.Addr, ShadowMode: r.ShadowMode}
	if r.TLSCertFile != "" && r.TLSKeyFile != "" {
		out.TLSCertFile, out.TLSKeyFile, out.TLSClientCAFile = r.TLSCertFile, r.TLSKeyFile, r.TLSClientCAFile
	}
	if !rl.Enabled {
		v.add(g+"ADDR", ErrConflict, "the rate-limit service decides with the Redis limiter: set %sENABLED=true (%sPROVIDER=%s)", envRateLimitGroup, envRateLimitGroup, ProviderRedis)
	}
	v.listenAddr(g+"ADDR", r.Addr, web)
	if r.HTTPAddr != "" {
		out.HTTPAddr = r.HTTPAddr
		if v.listenAddr(g+"HTTP_ADDR", r.HTTPAddr, web) && sameListen(r.HTTPAddr, r.Addr) {
			v.add(g+"HTTP_ADDR", ErrConflict, "%q is also %sADDR", bounded(r.HTTPAddr), g)
		}
	}
	switch fi, err := os.Stat(r.ConfigDir); {
	case r.ConfigDir == "":
		v.add(g+"CONFIG_DIR", ErrRequired, "the directory of rule files (*.yaml) when %sADDR is set", g)
	case err != nil:
		v.add(g+"CONFIG_DIR", ErrInvalid, "%w", err)
	case !fi.IsDir():
		v.add(g+"CONFIG_DIR", ErrInvalid, "%s is not a directory", bounded(r.ConfigDir))
	default:
		out.ConfigDir = r.ConfigDir
	}
	if slices.Contains(RLSUndecided, r.Undecided) {
		out.Undecided = r.Undecided
	} else {
		v.add(g+"UNDECIDED", ErrUnsupported, "%q: want fail-closed or error", bounded(r.Undecided))
	}
	switch {
	case r.TLSCertFile != "" && r.TLSKeyFile != "":
		// Loaded and checked by the wiring (wiring.CheckRLS).
	case r.TLSCertFile != "":
		v.add(g+"TLS_KEY_FILE", ErrRequired, "%sTLS_CERT_FILE is set", g)
	case r.TLSKeyFile != "":
		v.add(g+"TLS_CERT_FILE", ErrRequired, "%sTLS_KEY_FILE is set", g)
	case r.TLSClientCAFile != "":
		v.add(g+"TLS_CLIENT_CA_FILE", ErrConflict, "client certificates need the server's: set %sTLS_CERT_FILE and %sTLS_KEY_FILE", g, g)
	}
	return out
}

// listenAddr checks a listen address and that it is none of the web
// listeners'; it reports whether addr parsed.
func (v *errs) listenAddr(name, addr string, web rawWeb) bool {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		v.add(name, ErrInvalid, "%q: want [host]:port: %w", bounded(addr), err)
		return false
	}
	if sameListen(addr, web.Addr) {
		v.add(name, ErrConflict, "%q is also %sADDR: the rate-limit service needs its own address", bounded(addr), envWebGroup)
	}
	if web.AdminAddr != "" && sameListen(addr, web.AdminAddr) {
		v.add(name, ErrConflict, "%q is also %sADMIN_ADDR: the rate-limit service needs its own address", bounded(addr), envWebGroup)
	}
	return true
}

// sameListen reports whether two listen addresses are one; port 0 (any
// free port) never collides.
func sameListen(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return false
	}
	if pa != pb || pa == "0" {
		return false
	}
	// An unspecified host binds every address, so it meets any other.
	return ha == hb || unspecified(ha) || unspecified(hb)
}

func unspecified(h string) bool {
	if h == "" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsUnspecified()
}
