package config

import (
	"strings"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
)

// identity validates APP_WEB_IDENTITY and the variables of its mode into
// out (whose TrustedProxies are already parsed). A variable of another
// mode is an error, not ignored: a keys file that does nothing would let
// the operator believe keys are checked.
func (v *errs) identity(w rawWeb, out *Web) {
	const g = envWebGroup
	mode := IdentityMode(strings.TrimSpace(w.Identity))
	switch mode {
	case IdentityIP, IdentityAPIKey, IdentityTrustedHeader:
		out.Identity = mode
	default:
		v.add(g+"IDENTITY", ErrUnsupported, "%q: want ip, api-key or trusted-header", bounded(w.Identity))
		return
	}
	if mode != IdentityAPIKey && w.APIKeysFile != "" {
		v.add(g+"API_KEYS_FILE", ErrConflict, "set only with %sIDENTITY=api-key (it is %s)", g, mode)
	}
	if mode != IdentityTrustedHeader && w.IdentityHeader != "" {
		v.add(g+"IDENTITY_HEADER", ErrConflict, "set only with %sIDENTITY=trusted-header (it is %s)", g, mode)
	}
	switch mode {
	case IdentityAPIKey:
		if w.APIKeysFile == "" {
			v.add(g+"API_KEYS_FILE", ErrRequired, "%sIDENTITY=api-key needs a file of SHA-256 key digests, one per line", g)
			return
		}
		keys, err := subject.ReadAPIKeysFile(w.APIKeysFile)
		if err != nil {
			v.add(g+"API_KEYS_FILE", ErrInvalid, "%s", oneLine(err))
			return
		}
		out.APIKeysFile, out.APIKeys = w.APIKeysFile, keys
	case IdentityTrustedHeader:
		if w.IdentityHeader == "" {
			v.add(g+"IDENTITY_HEADER", ErrRequired, "%sIDENTITY=trusted-header needs the header your authenticating proxy sets (e.g. X-Authenticated-User)", g)
		}
		if len(out.TrustedProxies) == 0 {
			v.add(g+"TRUSTED_PROXIES", ErrRequired, "%sIDENTITY=trusted-header honours %sIDENTITY_HEADER only from trusted proxies: list them", g, g)
		}
		if w.IdentityHeader == "" || len(out.TrustedProxies) == 0 {
			return
		}
		ips, err := subject.NewResolver(subject.Config{TrustedProxies: out.TrustedProxies})
		if err != nil {
			return // reported under TRUSTED_PROXIES
		}
		th, err := subject.NewTrustedHeader(w.IdentityHeader, ips)
		if err != nil {
			v.add(g+"IDENTITY_HEADER", ErrInvalid, "%s", oneLine(err))
			return
		}
		out.IdentityHeader = th.Header()
	}
}

// oneLine is err's text on one line, with subject's "invalid subject
// config: " prefix dropped (the VarError already says the variable is
// invalid).
func oneLine(err error) string {
	s := strings.ReplaceAll(err.Error(), "\n", "; ")
	return strings.Replace(s, subject.ErrInvalidConfig.Error()+": ", "", 1)
}
