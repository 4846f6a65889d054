package wiring

import (
	"fmt"
	"strings"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// envIdentityHeader names the trusted-header variable (envAPIKeysFile,
// apikeys.go, the keys file).
const envIdentityHeader = config.Prefix + "WEB_IDENTITY_HEADER"

// CheckIdentity checks, by the web adapter's rules, what config left to
// it of w's identity (ADR 0036: config parses, the wiring builds): the
// digests in APP_WEB_API_KEYS_FILE (api-key mode) and the header of
// APP_WEB_IDENTITY_HEADER (trusted-header mode). Each problem is a
// *config.VarError naming its variable (config.ErrInvalid), on one line
// and never echoing a line of the keys file, as config.Load's are: the
// service and tlbctl check run it right after config.Load and report
// both alike. It returns the digests read (nil in the other modes).
func CheckIdentity(w config.Web) ([]subject.APIKeyDigest, error) {
	switch w.Identity {
	case config.IdentityAPIKey:
		return apiKeyDigests(w.APIKeysFile)
	case config.IdentityTrustedHeader:
		_, err := trustedHeader(w, nil)
		return nil, err
	}
	return nil, nil
}

// apiKeyDigests reads the keys file; an error is a *config.VarError
// naming APP_WEB_API_KEYS_FILE.
func apiKeyDigests(path string) ([]subject.APIKeyDigest, error) {
	keys, err := subject.ReadAPIKeysFile(path)
	if err != nil {
		return nil, identityError(envAPIKeysFile, err)
	}
	return keys, nil
}

// trustedHeader builds the identifier of trusted-header mode over
// resolver (nil: one of w's trusted proxies); an error is a
// *config.VarError naming the variable at fault.
func trustedHeader(w config.Web, resolver *subject.Resolver) (*subject.TrustedHeader, error) {
	if resolver == nil {
		var err error
		if resolver, err = subject.NewResolver(subject.Config{TrustedProxies: w.TrustedProxies, IPv6PrefixLen: w.IPv6Prefix}); err != nil {
			return nil, identityError(config.Prefix+"WEB_TRUSTED_PROXIES", err)
		}
	}
	th, err := subject.NewTrustedHeader(w.IdentityHeader, resolver)
	if err != nil {
		return nil, identityError(envIdentityHeader, err)
	}
	return th, nil
}

// identityError is the web adapter's configuration error err as
// config.Load reports one: a *config.VarError of config.ErrInvalid naming
// name, on one line, with subject's "invalid subject config: " prefix
// dropped (the VarError already says the variable is invalid).
func identityError(name string, err error) error {
	s := strings.ReplaceAll(err.Error(), "\n", "; ")
	s = strings.Replace(s, subject.ErrInvalidConfig.Error()+": ", "", 1)
	return &config.VarError{Var: name, Err: fmt.Errorf("%w: %s", config.ErrInvalid, s)}
}
