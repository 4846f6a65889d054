package config

import (
	"net/textproto"
	"strings"
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
		out.APIKeysFile = w.APIKeysFile
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
		// The header's syntax and the headers it may not be are the web
		// adapter's (subject.NewTrustedHeader), checked by the wiring.
		out.IdentityHeader = textproto.CanonicalMIMEHeaderKey(w.IdentityHeader)
	}
}
