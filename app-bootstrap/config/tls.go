package config

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
)

func (v *errs) tls(name string, t rawTLS, addr string) (TLS, *tls.Config) {
	settings := TLS{Enabled: t.Enabled, CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName}
	if t.InsecureSkipVerify {
		v.add(name+"INSECURE_SKIP_VERIFY", ErrUnsupported, "certificate verification cannot be disabled; configure %sCA_FILE instead", name)
	}
	if !t.Enabled {
		for _, f := range []struct{ v, s string }{{"CA_FILE", t.CAFile}, {"CERT_FILE", t.CertFile}, {"KEY_FILE", t.KeyFile}, {"SERVER_NAME", t.ServerName}} {
			if f.s != "" {
				v.add(name+f.v, ErrConflict, "set but %sENABLED is false", name)
			}
		}
		return settings, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		pool := x509.NewCertPool()
		switch {
		case err != nil:
			v.add(name+"CA_FILE", ErrInvalid, "%w", err)
		case !pool.AppendCertsFromPEM(pem):
			v.add(name+"CA_FILE", ErrInvalid, "%s holds no PEM certificate", t.CAFile)
		default:
			cfg.RootCAs = pool
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			v.add(name+"CERT_FILE", ErrInvalid, "with %sKEY_FILE: %w", name, err)
		} else {
			cfg.Certificates = []tls.Certificate{cert}
		}
	case t.CertFile != "":
		v.add(name+"KEY_FILE", ErrRequired, "%sCERT_FILE is set", name)
	case t.KeyFile != "":
		v.add(name+"CERT_FILE", ErrRequired, "%sKEY_FILE is set", name)
	}
	return settings, cfg
}
