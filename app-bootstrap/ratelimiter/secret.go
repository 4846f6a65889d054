package ratelimiter

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// The HKDF labels of the two secrets derived from Options.Secret
// (docs/adr/0032-front-door.md). They are part of the key format: changing
// one renames every key and every subject.
const (
	keySecretLabel     = "tech-log-backend/ratelimiter/v1/key-secret"
	subjectSecretLabel = "tech-log-backend/ratelimiter/v1/subject-secret"
	derivedLen         = 32
)

// DeriveSecrets returns the two secrets New derives from one
// Options.Secret, as the service's variables take them
// (APP_RATE_LIMIT_KEY_SECRET and APP_WEB_SUBJECT_SECRET): the hex of
// HKDF-SHA256(secret, no salt, label, 32 bytes) under two distinct labels.
// A service instance configured with them shares budgets with front-door
// instances given secret. secret must be at least keyspace.MinSecretLen
// bytes; the error never contains it.
func DeriveSecrets(secret string) (keySecret, subjectSecret string, err error) {
	if _, err := keyspace.NewSecret([]byte(secret)); err != nil {
		return "", "", err
	}
	derive := func(label string) (string, error) {
		b, err := hkdf.Key(sha256.New, []byte(secret), nil, label, derivedLen)
		if err != nil {
			return "", fmt.Errorf("derive %s: %w", label, err)
		}
		return hex.EncodeToString(b), nil
	}
	if keySecret, err = derive(keySecretLabel); err != nil {
		return "", "", err
	}
	if subjectSecret, err = derive(subjectSecretLabel); err != nil {
		return "", "", err
	}
	return keySecret, subjectSecret, nil
}
