package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// selfSigned writes a self-signed certificate and its key as PEM files.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redis.test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		DNSNames:              []string{"redis.test"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile = writeFile(t, "cert.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	keyFile = writeFile(t, "key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	return certFile, keyFile
}

func TestLoadTLS(t *testing.T) {
	cert, key := selfSigned(t)
	env := with(enabledEnv(),
		"APP_RATE_LIMIT_REDIS_ADDR", "redis.test:6380",
		"APP_RATE_LIMIT_REDIS_TLS_ENABLED", "true",
		"APP_RATE_LIMIT_REDIS_TLS_CA_FILE", cert,
		"APP_RATE_LIMIT_REDIS_TLS_CERT_FILE", cert,
		"APP_RATE_LIMIT_REDIS_TLS_KEY_FILE", key)
	cfg, err := Load(env)
	require.NoError(t, err)
	tc := cfg.RateLimit.Redis.TLSConfig()
	require.NotNil(t, tc)
	assert.Equal(t, uint16(tls.VersionTLS12), tc.MinVersion)
	assert.Equal(t, "redis.test", tc.ServerName, "server name defaults to the address host")
	assert.NotNil(t, tc.RootCAs)
	assert.Len(t, tc.Certificates, 1)
	assert.False(t, tc.InsecureSkipVerify)
	assert.Contains(t, cfg.RateLimit.Redis.String(), "tls")

	// The copy is independent: callers cannot change the configuration.
	tc.ServerName = "changed"
	assert.Equal(t, "redis.test", cfg.RateLimit.Redis.TLSConfig().ServerName)

	t.Run("explicit server name", func(t *testing.T) {
		cfg, err := Load(with(env, "APP_RATE_LIMIT_REDIS_TLS_SERVER_NAME", "other.test"))
		require.NoError(t, err)
		assert.Equal(t, "other.test", cfg.RateLimit.Redis.TLSConfig().ServerName)
	})
	t.Run("not a certificate", func(t *testing.T) {
		bogus := writeFile(t, "bogus.pem", "not pem")
		_, err := Load(with(env, "APP_RATE_LIMIT_REDIS_TLS_CA_FILE", bogus))
		require.Error(t, err)
		ves := VarErrors(err)
		require.Len(t, ves, 1)
		assert.Equal(t, "APP_RATE_LIMIT_REDIS_TLS_CA_FILE", ves[0].Var)
		assert.Contains(t, err.Error(), "holds no PEM certificate")
	})
	t.Run("key does not match", func(t *testing.T) {
		_, otherKey := selfSigned(t)
		_, err := Load(with(env, "APP_RATE_LIMIT_REDIS_TLS_KEY_FILE", otherKey))
		require.Error(t, err)
		assert.Equal(t, "APP_RATE_LIMIT_REDIS_TLS_CERT_FILE", VarErrors(err)[0].Var)
	})
	t.Run("cache has its own tls section", func(t *testing.T) {
		cfg, err := Load(with(env, "APP_CACHE_ENABLED", "true", "APP_CACHE_REDIS_ADDR", "127.0.0.1:6391",
			"APP_CACHE_REDIS_KEY_SECRET", cacheSecret))
		require.NoError(t, err)
		assert.Nil(t, cfg.Cache.Redis.TLSConfig(), "the coordination TLS settings never leak into the cache")
	})
}
