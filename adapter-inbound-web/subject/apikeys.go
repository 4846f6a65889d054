package subject

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"strings"
	"sync/atomic"
)

// APIKeyHeader is the request header that carries an API key. Only APIKeys
// reads it, and only a key found in the configured set becomes an identity.
const APIKeyHeader = "X-API-Key"

var apiKeyHeaderKey = textproto.CanonicalMIMEHeaderKey(APIKeyHeader)

// Bounds on API keys and key files.
const (
	// MaxAPIKeyLen is the longest X-API-Key that is hashed; a longer one is
	// unknown (401) without being hashed.
	MaxAPIKeyLen = 1024
	// MaxAPIKeys bounds the key set: verification compares the presented
	// key's digest with every digest in the set, so its cost is linear in
	// the set's size.
	MaxAPIKeys = 10_000
	// maxKeysFileLen bounds a keys file: MaxAPIKeys lines of a digest with
	// room for comments.
	maxKeysFileLen = 4 << 20
)

// APIKeyDigest is the SHA-256 digest of an API key: what a keys file holds,
// so that the file contains no usable secret.
type APIKeyDigest [sha256.Size]byte

// DigestAPIKey returns the digest of key (for writing keys files and tests;
// the shell equivalent is `printf %s "$key" | sha256sum`).
func DigestAPIKey(key string) APIKeyDigest { return sha256.Sum256([]byte(key)) }

// String is the digest in lower-case hex, as in a keys file.
func (d APIKeyDigest) String() string { return hex.EncodeToString(d[:]) }

// ParseAPIKeyDigests reads a keys file: one SHA-256 digest per line as 64
// hex digits (either case), surrounding blanks ignored; empty lines and lines
// starting with '#' are skipped. At least one and at most MaxAPIKeys
// digests. An error wraps ErrInvalidConfig and names the line, never its
// content (a line may hold a raw key pasted by mistake).
func ParseAPIKeyDigests(r io.Reader) ([]APIKeyDigest, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxKeysFileLen+1))
	sc.Buffer(make([]byte, 0, 256), 64<<10)
	var out []APIKeyDigest
	read := 0
	line := 0
	for sc.Scan() {
		line++
		read += len(sc.Bytes()) + 1
		if read > maxKeysFileLen+1 {
			return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalidConfig, maxKeysFileLen)
		}
		f := bytes.TrimSpace(sc.Bytes())
		if len(f) == 0 || f[0] == '#' {
			continue
		}
		var d APIKeyDigest
		if len(f) != 2*len(d) {
			return nil, fmt.Errorf("%w: line %d: want a SHA-256 digest of 64 hex digits, got %d characters", ErrInvalidConfig, line, len(f))
		}
		if _, err := hex.Decode(d[:], f); err != nil {
			return nil, fmt.Errorf("%w: line %d: want a SHA-256 digest of 64 hex digits: not hex", ErrInvalidConfig, line)
		}
		if len(out) == MaxAPIKeys {
			return nil, fmt.Errorf("%w: line %d: more than %d digests", ErrInvalidConfig, line, MaxAPIKeys)
		}
		out = append(out, d)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: line %d is too long", ErrInvalidConfig, line+1)
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no digest (every request would get 401)", ErrInvalidConfig)
	}
	return out, nil
}

// ReadAPIKeysFile opens path and parses it with ParseAPIKeyDigests.
func ReadAPIKeysFile(path string) ([]APIKeyDigest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	defer f.Close()
	d, err := ParseAPIKeyDigests(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// APIKeys identifies requests by a verified X-API-Key: the key's SHA-256
// digest must be in the configured set. It is safe for concurrent use, and
// Replace swaps the set atomically (for a reload on SIGHUP).
type APIKeys struct {
	set atomic.Pointer[keySet]
}

// keySet holds the digests as little-endian 64-bit words, four per digest,
// in one array, for a branch-free scan.
type keySet struct {
	words []uint64
}

func newKeySet(digests []APIKeyDigest) *keySet {
	ks := &keySet{words: make([]uint64, 0, 4*len(digests))}
	for i := range digests {
		ks.words = append(ks.words, digestWords(&digests[i])...)
	}
	return ks
}

func digestWords(d *APIKeyDigest) []uint64 {
	return []uint64{
		binary.LittleEndian.Uint64(d[0:8]), binary.LittleEndian.Uint64(d[8:16]),
		binary.LittleEndian.Uint64(d[16:24]), binary.LittleEndian.Uint64(d[24:32]),
	}
}

// contains reports whether d is in the set in constant time: d is compared
// with every digest, word by word, with no branch or early exit depending
// on the data, so the time taken depends on the size of the set only.
func (ks *keySet) contains(d *APIKeyDigest) bool {
	a0 := binary.LittleEndian.Uint64(d[0:8])
	a1 := binary.LittleEndian.Uint64(d[8:16])
	a2 := binary.LittleEndian.Uint64(d[16:24])
	a3 := binary.LittleEndian.Uint64(d[24:32])
	var found uint64
	w := ks.words
	for i := 0; i+3 < len(w); i += 4 {
		x := (w[i] ^ a0) | (w[i+1] ^ a1) | (w[i+2] ^ a2) | (w[i+3] ^ a3)
		// x == 0 exactly when the digests are equal: (x | -x) has its top
		// bit set for every x != 0.
		found |= ((x | -x) >> 63) ^ 1
	}
	return subtle.ConstantTimeEq(int32(found), 1) == 1
}

func (ks *keySet) len() int { return len(ks.words) / 4 }

// NewAPIKeys returns an APIKeys over a copy of digests (1..MaxAPIKeys).
func NewAPIKeys(digests []APIKeyDigest) (*APIKeys, error) {
	k := &APIKeys{}
	if err := k.Replace(digests); err != nil {
		return nil, err
	}
	return k, nil
}

// Replace makes a copy of digests the key set; on error the set is
// unchanged.
func (k *APIKeys) Replace(digests []APIKeyDigest) error {
	if len(digests) == 0 || len(digests) > MaxAPIKeys {
		return fmt.Errorf("%w: %d api key digests, want 1..%d", ErrInvalidConfig, len(digests), MaxAPIKeys)
	}
	k.set.Store(newKeySet(digests))
	return nil
}

// Len is the size of the key set.
func (k *APIKeys) Len() int { return k.set.Load().len() }

// Identify returns the identity of the request's X-API-Key (kind
// KindAPIKey, the value being the key's digest) when its digest is in the
// set. No key, a blank one, one longer than MaxAPIKeyLen or one not in the
// set: ErrUnauthenticated. Two X-API-Key fields: ErrAPIKeyAmbiguous. The
// digest is compared with every digest of the set in constant time, so the
// time taken depends on the size of the set only, not on which digest (if
// any) matches: a few nanoseconds per digest on top of the SHA-256
// (BenchmarkAPIKeysIdentify).
func (k *APIKeys) Identify(r *http.Request) (Identity, error) {
	vals := r.Header[apiKeyHeaderKey]
	switch {
	case len(vals) == 0:
		return Identity{}, fmt.Errorf("%w: no %s", ErrUnauthenticated, APIKeyHeader)
	case len(vals) > 1:
		return Identity{}, ErrAPIKeyAmbiguous
	}
	key := strings.TrimSpace(vals[0])
	if key == "" || len(key) > MaxAPIKeyLen {
		return Identity{}, fmt.Errorf("%w: unknown %s", ErrUnauthenticated, APIKeyHeader)
	}
	d := DigestAPIKey(key)
	if !k.set.Load().contains(&d) {
		return Identity{}, fmt.Errorf("%w: unknown %s", ErrUnauthenticated, APIKeyHeader)
	}
	return Identity{kind: KindAPIKey, key: string(d[:])}, nil
}
