package programs

import (
	"bytes"
	"crypto/sha1" //nolint:gosec // SHA1 is what EVALSHA names a script by, not a security boundary.
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// MinRedisVersion is the lowest Redis version the programs are declared for:
// the version the CI service lane runs (Debian's redis-server 7.0). They need
// the `#!lua` shebang (Redis 7.0) and TYPE/pcall replies as tables.
const MinRedisVersion = "7.0.0"

// ManifestFormat identifies the manifest.json layout.
const ManifestFormat = "rate-programs-manifest/v1"

// ManifestFile is the name of the generated manifest beside the sources.
const ManifestFile = "manifest.json"

var (
	//go:embed rate-fixed-window-v1.lua
	fixedWindowSource string
	//go:embed rate-sliding-counter-v1.lua
	slidingCounterSource string
	//go:embed rate-token-bucket-v1.lua
	tokenBucketSource string
	//go:embed rate-gcra-v1.lua
	gcraSource string
	//go:embed rate-gcra-charge-v1.lua
	gcraChargeSource string
	//go:embed rate-gcra-dedup-v2.lua
	gcraDedupSource string
	//go:embed rate-sliding-log-v1.lua
	slidingLogSource string
	//go:embed rate-sliding-log-charge-v1.lua
	slidingLogChargeSource string
	//go:embed rate-sliding-log-dedup-v2.lua
	slidingLogDedupSource string
	//go:embed rate-fixed-window-charge-v1.lua
	fixedWindowChargeSource string
	//go:embed rate-sliding-counter-charge-v1.lua
	slidingCounterChargeSource string
	//go:embed rate-token-bucket-charge-v1.lua
	tokenBucketChargeSource string
	//go:embed rate-fixed-window-dedup-v2.lua
	fixedWindowDedupSource string
	//go:embed rate-sliding-counter-dedup-v2.lua
	slidingCounterDedupSource string
	//go:embed rate-token-bucket-dedup-v2.lua
	tokenBucketDedupSource string
	//go:embed rate-fixed-window-refund-v1.lua
	fixedWindowRefundSource string
	//go:embed rate-sliding-counter-refund-v1.lua
	slidingCounterRefundSource string
	//go:embed rate-token-bucket-refund-v1.lua
	tokenBucketRefundSource string
	//go:embed rate-gcra-refund-v1.lua
	gcraRefundSource string
	//go:embed rate-concurrency-v1.lua
	concurrencySource string
	//go:embed rate-concurrency-charge-v1.lua
	concurrencyChargeSource string
	//go:embed rate-concurrency-refund-v1.lua
	concurrencyRefundSource string
	//go:embed rate-sliding-log-refund-v1.lua
	slidingLogRefundSource string
	//go:embed rate-leaky-bucket-v1.lua
	leakyBucketSource string
	//go:embed rate-leaky-bucket-charge-v1.lua
	leakyBucketChargeSource string
	//go:embed rate-leaky-bucket-refund-v1.lua
	leakyBucketRefundSource string
	//go:embed rate-token-bucket-lease-v1.lua
	tokenBucketLeaseSource string
	//go:embed rate-token-bucket-giveback-v1.lua
	tokenBucketGiveBackSource string
	//go:embed rate-gcra-lease-v1.lua
	gcraLeaseSource string
	//go:embed rate-gcra-giveback-v1.lua
	gcraGiveBackSource string
	//go:embed rate-sliding-log-lease-v1.lua
	slidingLogLeaseSource string
	//go:embed rate-sliding-log-giveback-v1.lua
	slidingLogGiveBackSource string
	//go:embed manifest.json
	manifestJSON []byte
)

// Program is one embedded rate-limit program as the manifest records it.
type Program struct {
	// Name is the program's stable name, e.g. "rate-fixed-window-v1"; the
	// source file is Name + ".lua".
	Name string
	// Version is the program version (the "v1" of the name).
	Version int
	// Algorithm is the algorithm the program implements.
	Algorithm ratelimit.Algorithm
	// Source is the exact embedded source, `#!lua` line included: what EVAL
	// sends after a NOSCRIPT.
	Source string
	// SHA1 is the lowercase hex SHA1 of Source: what EVALSHA sends.
	SHA1 string
	// MinRedisVersion is the lowest Redis version the program supports.
	MinRedisVersion string
	// ArgCount is the number of ARGV entries the program expects
	// (ArgCountWindow or ArgCountTokenBucket, plus ArgCountDedup for a
	// dedup program).
	ArgCount int
	// NumKeys is the number of KEYS it takes: NumKeys, or NumKeysDedup
	// for a dedup program.
	NumKeys int
}

// definition is the compiled-in description of a program; the manifest is
// generated from these and the embedded bytes.
type definition struct {
	name      string
	version   int
	algorithm ratelimit.Algorithm
	argCount  int
	source    string
	// charge marks a reconciliation program (ChargeFor), not a decision
	// program (ForAlgorithm, All).
	charge bool
	// dedup marks a dedup decision program (DedupFor).
	dedup bool
	// refund marks a refund program (RefundFor).
	refund bool
	// lease marks a lease program: a reservation (lease) or a give-back
	// (giveBack) (ADR 0042; Bundle.Lease and Bundle.GiveBack).
	lease, giveBack bool
}

func definitions() []definition {
	return []definition{
		{"rate-fixed-window-v1", 1, ratelimit.AlgorithmFixedWindow, ArgCountWindow, fixedWindowSource, false, false, false, false, false},
		{"rate-sliding-counter-v1", 1, ratelimit.AlgorithmSlidingWindowCounter, ArgCountWindow, slidingCounterSource, false, false, false, false, false},
		{"rate-token-bucket-v1", 1, ratelimit.AlgorithmTokenBucket, ArgCountTokenBucket, tokenBucketSource, false, false, false, false, false},
		{"rate-gcra-v1", 1, ratelimit.AlgorithmGCRA, ArgCountGCRA, gcraSource, false, false, false, false, false},
		{"rate-sliding-log-v1", 1, ratelimit.AlgorithmSlidingLog, ArgCountWindow, slidingLogSource, false, false, false, false, false},
		{"rate-leaky-bucket-v1", 1, ratelimit.AlgorithmLeakyBucket, ArgCountLeakyBucket, leakyBucketSource, false, false, false, false, false},
		{"rate-concurrency-v1", 1, ratelimit.AlgorithmConcurrency, ArgCountWindow, concurrencySource, false, false, false, false, false},
		{"rate-fixed-window-charge-v1", 1, ratelimit.AlgorithmFixedWindow, ArgCountWindow, fixedWindowChargeSource, true, false, false, false, false},
		{"rate-sliding-counter-charge-v1", 1, ratelimit.AlgorithmSlidingWindowCounter, ArgCountWindow, slidingCounterChargeSource, true, false, false, false, false},
		{"rate-token-bucket-charge-v1", 1, ratelimit.AlgorithmTokenBucket, ArgCountTokenBucket, tokenBucketChargeSource, true, false, false, false, false},
		{"rate-gcra-charge-v1", 1, ratelimit.AlgorithmGCRA, ArgCountGCRA, gcraChargeSource, true, false, false, false, false},
		{"rate-sliding-log-charge-v1", 1, ratelimit.AlgorithmSlidingLog, ArgCountWindow, slidingLogChargeSource, true, false, false, false, false},
		{"rate-leaky-bucket-charge-v1", 1, ratelimit.AlgorithmLeakyBucket, ArgCountLeakyBucket, leakyBucketChargeSource, true, false, false, false, false},
		{"rate-concurrency-charge-v1", 1, ratelimit.AlgorithmConcurrency, ArgCountWindow, concurrencyChargeSource, true, false, false, false, false},
		{"rate-fixed-window-dedup-v2", 2, ratelimit.AlgorithmFixedWindow, ArgCountWindow + ArgCountDedup, fixedWindowDedupSource, false, true, false, false, false},
		{"rate-sliding-counter-dedup-v2", 2, ratelimit.AlgorithmSlidingWindowCounter, ArgCountWindow + ArgCountDedup, slidingCounterDedupSource, false, true, false, false, false},
		{"rate-token-bucket-dedup-v2", 2, ratelimit.AlgorithmTokenBucket, ArgCountTokenBucket + ArgCountDedup, tokenBucketDedupSource, false, true, false, false, false},
		{"rate-gcra-dedup-v2", 2, ratelimit.AlgorithmGCRA, ArgCountGCRA + ArgCountDedup, gcraDedupSource, false, true, false, false, false},
		{"rate-sliding-log-dedup-v2", 2, ratelimit.AlgorithmSlidingLog, ArgCountWindow + ArgCountDedup, slidingLogDedupSource, false, true, false, false, false},
		{"rate-fixed-window-refund-v1", 1, ratelimit.AlgorithmFixedWindow, ArgCountWindow + ArgCountRefund, fixedWindowRefundSource, false, false, true, false, false},
		{"rate-sliding-counter-refund-v1", 1, ratelimit.AlgorithmSlidingWindowCounter, ArgCountWindow + ArgCountRefund, slidingCounterRefundSource, false, false, true, false, false},
		{"rate-token-bucket-refund-v1", 1, ratelimit.AlgorithmTokenBucket, ArgCountTokenBucket + ArgCountRefund, tokenBucketRefundSource, false, false, true, false, false},
		{"rate-gcra-refund-v1", 1, ratelimit.AlgorithmGCRA, ArgCountGCRA + ArgCountRefund, gcraRefundSource, false, false, true, false, false},
		{"rate-sliding-log-refund-v1", 1, ratelimit.AlgorithmSlidingLog, ArgCountWindow + ArgCountRefund, slidingLogRefundSource, false, false, true, false, false},
		{"rate-leaky-bucket-refund-v1", 1, ratelimit.AlgorithmLeakyBucket, ArgCountLeakyBucket + ArgCountRefund, leakyBucketRefundSource, false, false, true, false, false},
		{"rate-concurrency-refund-v1", 1, ratelimit.AlgorithmConcurrency, ArgCountWindow + ArgCountRefund, concurrencyRefundSource, false, false, true, false, false},
		{name: "rate-token-bucket-lease-v1", version: 1, algorithm: ratelimit.AlgorithmTokenBucket, argCount: ArgCountTokenBucket + ArgCountLease, source: tokenBucketLeaseSource, lease: true},
		{name: "rate-gcra-lease-v1", version: 1, algorithm: ratelimit.AlgorithmGCRA, argCount: ArgCountGCRA + ArgCountLease, source: gcraLeaseSource, lease: true},
		{name: "rate-sliding-log-lease-v1", version: 1, algorithm: ratelimit.AlgorithmSlidingLog, argCount: ArgCountWindow + ArgCountLease, source: slidingLogLeaseSource, lease: true},
		{name: "rate-token-bucket-giveback-v1", version: 1, algorithm: ratelimit.AlgorithmTokenBucket, argCount: ArgCountTokenBucket + ArgCountGiveBack, source: tokenBucketGiveBackSource, giveBack: true},
		{name: "rate-gcra-giveback-v1", version: 1, algorithm: ratelimit.AlgorithmGCRA, argCount: ArgCountGCRA + ArgCountGiveBack, source: gcraGiveBackSource, giveBack: true},
		{name: "rate-sliding-log-giveback-v1", version: 1, algorithm: ratelimit.AlgorithmSlidingLog, argCount: ArgCountWindow + ArgCountGiveBack, source: slidingLogGiveBackSource, giveBack: true},
	}
}

// manifest is the JSON layout of manifest.json.
type manifest struct {
	Format   string          `json:"format"`
	Programs []manifestEntry `json:"programs"`
}

type manifestEntry struct {
	Name            string `json:"name"`
	File            string `json:"file"`
	Version         int    `json:"version"`
	Algorithm       string `json:"algorithm"`
	SHA1            string `json:"sha1"`
	MinRedisVersion string `json:"minRedisVersion"`
}

// ErrManifest is wrapped by every error that reports a manifest that does not
// describe the embedded sources exactly.
var ErrManifest = errors.New("program manifest does not match the embedded sources")

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s)) //nolint:gosec // see import
	return hex.EncodeToString(sum[:])
}

// GenerateManifest renders the manifest for the embedded sources: the bytes
// manifest.json must hold.
func GenerateManifest() ([]byte, error) {
	return renderManifest(definitions())
}

// ManifestFor renders the manifest for sources (program name -> source
// text) instead of the embedded ones: what cmd/genmanifest writes after
// rendering the program files, before they are compiled in. Every program
// must be given, and nothing else.
func ManifestFor(sources map[string]string) ([]byte, error) {
	defs := definitions()
	if len(sources) != len(defs) {
		return nil, fmt.Errorf("manifest for %d sources: %d programs are defined", len(sources), len(defs))
	}
	for i := range defs {
		src, ok := sources[defs[i].name]
		if !ok {
			return nil, fmt.Errorf("manifest: no source for program %s", defs[i].name)
		}
		defs[i].source = src
	}
	return renderManifest(defs)
}

// Names returns the names of every embedded program in manifest order,
// decision and reconciliation programs alike; the file of each is name +
// ".lua".
func Names() []string {
	defs := definitions()
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.name
	}
	return names
}

func renderManifest(defs []definition) ([]byte, error) {
	m := manifest{Format: ManifestFormat}
	for _, d := range defs {
		m.Programs = append(m.Programs, manifestEntry{
			Name:            d.name,
			File:            d.name + ".lua",
			Version:         d.version,
			Algorithm:       d.algorithm.String(),
			SHA1:            sha1Hex(d.source),
			MinRedisVersion: MinRedisVersion,
		})
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render manifest: %w", err)
	}
	return append(out, '\n'), nil
}

// catalog holds the verified programs indexed by algorithm.
type catalog struct {
	byAlgorithm map[ratelimit.Algorithm]Program
	all         []Program
	charges     map[ratelimit.Algorithm]Program
	allCharges  []Program
	dedups      map[ratelimit.Algorithm]Program
	refunds     map[ratelimit.Algorithm]Program
	leases      map[ratelimit.Algorithm]Program
	giveBacks   map[ratelimit.Algorithm]Program
}

// buildCatalog decodes raw and checks it entry by entry against defs: same
// programs in the same order, and each SHA1 equal to that of the source.
func buildCatalog(raw []byte, defs []definition) (catalog, error) {
	var m manifest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return catalog{}, fmt.Errorf("%w: decode %s: %w", ErrManifest, ManifestFile, err)
	}
	if m.Format != ManifestFormat {
		return catalog{}, fmt.Errorf("%w: format %q, want %q", ErrManifest, m.Format, ManifestFormat)
	}
	if len(m.Programs) != len(defs) {
		return catalog{}, fmt.Errorf("%w: %d programs listed, %d embedded", ErrManifest, len(m.Programs), len(defs))
	}
	c := catalog{byAlgorithm: make(map[ratelimit.Algorithm]Program, len(defs)), charges: map[ratelimit.Algorithm]Program{}, dedups: map[ratelimit.Algorithm]Program{}, refunds: map[ratelimit.Algorithm]Program{},
		leases: map[ratelimit.Algorithm]Program{}, giveBacks: map[ratelimit.Algorithm]Program{}}
	for i, d := range defs {
		e := m.Programs[i]
		switch {
		case e.Name != d.name || e.File != d.name+".lua":
			return catalog{}, fmt.Errorf("%w: entry %d names %q (%q), want %q", ErrManifest, i, e.Name, e.File, d.name)
		case e.Version != d.version:
			return catalog{}, fmt.Errorf("%w: %s version %d, want %d", ErrManifest, d.name, e.Version, d.version)
		case e.Algorithm != d.algorithm.String():
			return catalog{}, fmt.Errorf("%w: %s algorithm %q, want %q", ErrManifest, d.name, e.Algorithm, d.algorithm)
		case e.MinRedisVersion != MinRedisVersion:
			return catalog{}, fmt.Errorf("%w: %s minRedisVersion %q, want %q", ErrManifest, d.name, e.MinRedisVersion, MinRedisVersion)
		case e.SHA1 != sha1Hex(d.source):
			return catalog{}, fmt.Errorf("%w: %s sha1 %s, embedded source has %s (run go generate)", ErrManifest, d.name, e.SHA1, sha1Hex(d.source))
		}
		p := Program{
			Name:            e.Name,
			Version:         e.Version,
			Algorithm:       d.algorithm,
			Source:          d.source,
			SHA1:            e.SHA1,
			MinRedisVersion: e.MinRedisVersion,
			ArgCount:        d.argCount,
			NumKeys:         NumKeys,
		}
		if d.dedup {
			p.NumKeys = NumKeysDedup
			c.dedups[d.algorithm] = p
			continue
		}
		if d.refund {
			c.refunds[d.algorithm] = p
			continue
		}
		if d.lease {
			c.leases[d.algorithm] = p
			continue
		}
		if d.giveBack {
			c.giveBacks[d.algorithm] = p
			continue
		}
		if d.charge {
			c.charges[d.algorithm] = p
			c.allCharges = append(c.allCharges, p)
			continue
		}
		c.byAlgorithm[d.algorithm] = p
		c.all = append(c.all, p)
	}
	return c, nil
}

var loadCatalog = sync.OnceValues(func() (catalog, error) {
	return buildCatalog(manifestJSON, definitions())
})

// Verify reports whether the embedded manifest describes the embedded sources
// exactly. When it does not, ForAlgorithm and All return nothing, so a
// provider built from a stale manifest fails closed at construction.
func Verify() error {
	_, err := loadCatalog()
	return err
}

// ForAlgorithm returns the program implementing a. ok is false for an
// unsupported algorithm or when Verify fails.
func ForAlgorithm(a ratelimit.Algorithm) (p Program, ok bool) {
	c, err := loadCatalog()
	if err != nil {
		return Program{}, false
	}
	p, ok = c.byAlgorithm[a]
	return p, ok
}

// ChargeFor returns the reconciliation program of a: the same state and
// arguments as ForAlgorithm(a)'s, with ARGV cost the units to charge; it
// consumes without denying and saturates at the limit (Charge is its
// model). ok is false for an unsupported algorithm or when Verify fails.
func ChargeFor(a ratelimit.Algorithm) (p Program, ok bool) {
	c, err := loadCatalog()
	if err != nil {
		return Program{}, false
	}
	p, ok = c.charges[a]
	return p, ok
}

// DedupFor returns the dedup decision program of a (rate-<algorithm>-
// dedup-v2): the decision of ForAlgorithm(a) on the same state, KEYS[2] the
// subject's dedup hash and ARGV the decision program's followed by
// DedupArgs; EvaluateDedup is its model. ok is false for an unsupported
// algorithm or when Verify fails.
func DedupFor(a ratelimit.Algorithm) (p Program, ok bool) {
	c, err := loadCatalog()
	if err != nil {
		return Program{}, false
	}
	p, ok = c.dedups[a]
	return p, ok
}

// RefundFor returns the refund program of a (rate-<algorithm>-refund-v1,
// ADR 0025): the same state and arguments as ForAlgorithm(a)'s, with ARGV
// cost the admission's cost, followed by RefundArgs (the admission's
// effective instant, its receipt); it gives back what that admission took,
// exactly and saturating, and never admits or denies (Refund is its
// model). ok is false for an unsupported algorithm or when Verify fails.
func RefundFor(a ratelimit.Algorithm) (p Program, ok bool) {
	c, err := loadCatalog()
	if err != nil {
		return Program{}, false
	}
	p, ok = c.refunds[a]
	return p, ok
}

// Charges returns the reconciliation programs in manifest order, or nil
// when Verify fails. The slice is a copy.
func Charges() []Program {
	c, err := loadCatalog()
	if err != nil {
		return nil
	}
	return append([]Program(nil), c.allCharges...)
}

// All returns every decision program in manifest order (fixed window,
// sliding counter, token bucket, GCRA, sliding log, leaky bucket), or nil
// when Verify fails; the reconciliation programs are Charges. The slice is
// a copy.
func All() []Program {
	c, err := loadCatalog()
	if err != nil {
		return nil
	}
	return append([]Program(nil), c.all...)
}
