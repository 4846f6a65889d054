package rlsconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"google.golang.org/protobuf/types/known/structpb"
)

// RateLimit is one configured limit: the rate_limit of a descriptor, with
// the descriptor's flags. Limits lists those of a Config and Match returns
// one of them, the same pointer, so a server can key its policies by the
// pointer (or by ID). A RateLimit is shared: never modify one.
type RateLimit struct {
	// ID is the limit's index in Config.Limits.
	ID int
	// Name is rate_limit.name, what other limits' replaces refer to.
	Name string
	// Unit and RequestsPerUnit are the reference's limit. Unit is 0 for an
	// unlimited limit, a policy reference and an algorithm given by its own
	// fields (see Algorithm).
	Unit            Unit
	RequestsPerUnit uint32
	// Unlimited: the descriptor matches and is never limited.
	Unlimited bool
	// Replaces are the names of limits this one overrides in a request
	// (see ApplyReplaces).
	Replaces []string
	// Policy is our extension `rate_limit: {policy: <id>}`: the id of a
	// policy of the policy file that decides instead of a unit and
	// requests_per_unit. Empty when not used.
	Policy string
	// Algorithm is our extension `rate_limit: {algorithm: ...}`; nil means
	// the reference's fixed window of RequestsPerUnit per Unit.
	Algorithm *Algorithm
	// ShadowMode, QuotaMode, DetailedMetric, ValueToMetric and
	// ShareThreshold are the descriptor's flags of the same names.
	ShadowMode     bool
	QuotaMode      bool
	DetailedMetric bool
	ValueToMetric  bool
	ShareThreshold bool
	// FullKey is the reference's stats key of the configured limit, its
	// composite path domain.key_value.key2 (distinct limits may share
	// one: a key may contain '.'). The key of one request, which
	// detailed_metric, value_to_metric and share_threshold change, is
	// Lookup's Matched.StatsKey.
	FullKey string
	// Metadata is the descriptor's metadata, nil when none.
	Metadata *structpb.Struct
}

// Entry is one entry of a request's descriptor.
type Entry struct {
	Key, Value string
}

// File is one configuration file: its name (for errors) and its content.
type File struct {
	Name string
	Data []byte
}

// Config is a loaded configuration: the domains of every file, each a tree
// of descriptors. Most callers want Match. It is immutable after Load and
// safe for concurrent use.
type Config struct {
	domains map[string]*node
	limits  []*RateLimit
}

// node is the reference's rateLimitDescriptor: children by composite key
// (key, or key_value), the wildcard children in file order, the limit.
type node struct {
	children        map[string]*node
	limit           *RateLimit
	wildcards       []wildcardEntry
	valueToMetric   bool
	shareThreshold  bool
	wildcardPattern string
	metadata        *structpb.Struct
}

// wildcardEntry is a child whose composite key contains '*', split on '*'
// once at load.
type wildcardEntry struct {
	key   string
	parts []string
}

// Load builds a Config from files, in order, with the reference's
// semantics (mergeDomainConfigs off: a domain is in one file only). Every
// fault is reported, each a *FileError naming the file, the domain and the
// key, joined with errors.Join; all wrap ErrInvalidConfig.
func Load(files []File) (*Config, error) {
	c := &Config{domains: map[string]*node{}}
	owner := map[string]string{}
	var errs []error
	for _, f := range files {
		root, err := parseFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if root.Domain == "" {
			errs = append(errs, &FileError{File: f.Name, Err: fmt.Errorf("%w: the file cannot have an empty domain", ErrEmptyDomain)})
			continue
		}
		if prev, dup := owner[root.Domain]; dup {
			errs = append(errs, &FileError{File: f.Name, Domain: root.Domain,
				Err: fmt.Errorf("%w: domain %q is already configured in file %q", ErrDuplicateDomain, bounded(root.Domain), prev)})
			continue
		}
		owner[root.Domain] = f.Name
		dom := &node{children: map[string]*node{}}
		l := loader{file: f.Name, domain: root.Domain}
		l.descriptors(dom, root.Domain+".", root.Descriptors)
		errs = append(errs, l.errs...)
		c.domains[root.Domain] = dom
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.index()
	return c, nil
}

// LoadDir loads every regular file named *.yaml or *.yml directly in dir,
// following symbolic links (a Kubernetes ConfigMap mount's files are links
// through ..data), in name order. Directories, such as ..data itself, are
// skipped.
func LoadDir(dir string) (*Config, error) {
	files, err := ReadDir(dir)
	if err != nil {
		return nil, err
	}
	return Load(files)
}

// ReadDir reads the files LoadDir would load.
func ReadDir(dir string) ([]File, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, &FileError{File: dir, Err: fmt.Errorf("%w: %w", ErrRead, err)}
	}
	var files []File
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") {
			continue
		}
		path := filepath.Join(dir, name)
		st, err := os.Stat(path)
		if err != nil {
			errs = append(errs, &FileError{File: name, Err: fmt.Errorf("%w: %w", ErrRead, err)})
			continue
		}
		if !st.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, &FileError{File: name, Err: fmt.Errorf("%w: %w", ErrRead, err)})
			continue
		}
		files = append(files, File{Name: name, Data: data})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

// HasDomain reports whether a file configures domain.
func (c *Config) HasDomain(domain string) bool {
	_, ok := c.domains[domain]
	return ok
}

// Domains lists the configured domains, sorted.
func (c *Config) Domains() []string {
	ds := make([]string, 0, len(c.domains))
	for d := range c.domains {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	return ds
}

// Limits lists every configured limit once, by domain, then depth first by
// composite key; Limits()[i].ID == i. The slice is shared: do not modify
// it.
func (c *Config) Limits() []*RateLimit { return c.limits }

// index numbers the limits in Limits order.
func (c *Config) index() {
	var walk func(n *node)
	walk = func(n *node) {
		if n.limit != nil {
			n.limit.ID = len(c.limits)
			c.limits = append(c.limits, n.limit)
		}
		keys := make([]string, 0, len(n.children))
		for k := range n.children {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walk(n.children[k])
		}
	}
	for _, d := range c.Domains() {
		walk(c.domains[d])
	}
}

// loader loads one file's descriptors, collecting faults.
type loader struct {
	file, domain string
	errs         []error
}

func (l *loader) fail(key string, err error) {
	l.errs = append(l.errs, &FileError{File: l.file, Domain: l.domain, Key: key, Err: err})
}

// descriptors is the reference's loadDescriptors: parentKey is the
// composite path so far, ending in '.'.
func (l *loader) descriptors(parent *node, parentKey string, ds []yamlDescriptor) {
	for _, d := range ds {
		if d.Key == "" {
			l.fail(strings.TrimSuffix(parentKey, "."), fmt.Errorf("%w: a descriptor has an empty key", ErrEmptyKey))
			continue
		}
		finalKey := d.Key
		if d.Value != "" {
			finalKey += "_" + d.Value
		}
		fullKey := parentKey + finalKey
		if _, dup := parent.children[finalKey]; dup {
			l.fail(fullKey, fmt.Errorf("%w: composite key %q appears twice at this level", ErrDuplicateKey, bounded(finalKey)))
			continue
		}
		var limit *RateLimit
		if d.RateLimit != nil {
			limit = l.rateLimit(fullKey, d)
		}
		wildcard := strings.Contains(finalKey, "*")
		if d.ShareThreshold && !wildcard {
			l.fail(fullKey, fmt.Errorf("%w: share_threshold needs a wildcard value (containing '*'), key %q has none", ErrShareThreshold, bounded(finalKey)))
		}
		n := &node{
			children:       map[string]*node{},
			limit:          limit,
			valueToMetric:  d.ValueToMetric,
			shareThreshold: d.ShareThreshold,
		}
		if d.ShareThreshold && wildcard {
			n.wildcardPattern = finalKey
		}
		if wildcard {
			parent.wildcards = append(parent.wildcards, wildcardEntry{key: finalKey, parts: strings.Split(finalKey, "*")})
		}
		md, err := parseMetadata(d.Metadata)
		if err != nil {
			l.fail(fullKey, fmt.Errorf("%w: %w", ErrMetadata, err))
		}
		n.metadata = md
		if limit != nil {
			limit.Metadata = md
		}
		l.descriptors(n, fullKey+".", d.Descriptors)
		parent.children[finalKey] = n
	}
}

// rateLimit is the reference's rate_limit check and NewRateLimit, with our
// policy and algorithm extensions.
func (l *loader) rateLimit(fullKey string, d yamlDescriptor) *RateLimit {
	y := d.RateLimit
	rl := &RateLimit{
		Name:           y.Name,
		Unlimited:      y.Unlimited,
		ShadowMode:     d.ShadowMode,
		QuotaMode:      d.QuotaMode,
		DetailedMetric: d.DetailedMetric,
		ValueToMetric:  d.ValueToMetric,
		ShareThreshold: d.ShareThreshold,
		FullKey:        fullKey,
		Replaces:       make([]string, len(y.Replaces)),
	}
	for i, r := range y.Replaces {
		rl.Replaces[i] = r.Name
		switch {
		case r.Name == "":
			l.fail(fullKey, fmt.Errorf("%w: replaces[%d] has an empty name", ErrReplaces, i))
		case r.Name == y.Name:
			l.fail(fullKey, fmt.Errorf("%w: replaces[%d] names the limit itself (%q)", ErrReplaces, i, bounded(r.Name)))
		}
	}
	if y.RequestsPerUnit != nil {
		rl.RequestsPerUnit = *y.RequestsPerUnit
	}
	present, fieldErrs, fields := extensionFields(y)
	switch {
	case y.Policy != nil:
		if *y.Policy == "" {
			l.fail(fullKey, fmt.Errorf("%w: policy is empty", ErrPolicy))
		}
		var mixed []string
		if y.Unit != nil {
			mixed = append(mixed, "unit")
		}
		if y.RequestsPerUnit != nil {
			mixed = append(mixed, "requests_per_unit")
		}
		if y.Unlimited {
			mixed = append(mixed, "unlimited")
		}
		if y.Algorithm != nil {
			mixed = append(mixed, "algorithm")
		}
		mixed = append(mixed, sortedKeys(present)...)
		if len(mixed) > 0 {
			l.fail(fullKey, fmt.Errorf("%w: policy %q cannot be combined with %s", ErrPolicy, bounded(*y.Policy), strings.Join(mixed, ", ")))
		}
		rl.Policy = *y.Policy
	case y.Algorithm != nil:
		alg, err := ratelimit.ParseAlgorithm(*y.Algorithm)
		spec, ok := algorithms[alg]
		if err != nil || !ok {
			l.fail(fullKey, fmt.Errorf("%w: algorithm %q is not one of %s", ErrAlgorithm, bounded(*y.Algorithm), algorithmNames()))
			return rl
		}
		if y.Unlimited {
			l.fail(fullKey, fmt.Errorf("%w: an unlimited limit cannot name algorithm %v", ErrAlgorithm, alg))
		}
		own := map[string]bool{}
		for _, f := range spec.fields {
			own[f] = true
		}
		for _, f := range sortedKeys(present) {
			if !own[f] {
				l.fail(fullKey, fmt.Errorf("%w: %s is not a field of algorithm %v", ErrAlgorithm, f, alg))
			}
		}
		unitForm := y.Unit != nil || y.RequestsPerUnit != nil || spec.build == nil
		if unitForm {
			if len(present) > 0 {
				l.fail(fullKey, fmt.Errorf("%w: algorithm %v takes unit and requests_per_unit or %s, not both", ErrAlgorithm, alg, strings.Join(spec.fields, ", ")))
			}
			u, err := ParseUnit(deref(y.Unit))
			if err != nil {
				l.fail(fullKey, fmt.Errorf("algorithm %v: %w", alg, err))
			}
			rl.Unit = u
			if spec.fromRate != nil && err == nil {
				rl.Algorithm = &Algorithm{Name: alg.String(), Params: spec.fromRate(int64(rl.RequestsPerUnit), u.Duration())}
			}
			return rl
		}
		for _, err := range fieldErrs {
			l.fail(fullKey, err)
		}
		for _, f := range spec.fields {
			if !present[f] {
				l.fail(fullKey, fmt.Errorf("%w: algorithm %v needs %s (or unit and requests_per_unit)", ErrAlgorithm, alg, f))
			}
		}
		rl.Algorithm = &Algorithm{Name: alg.String(), Params: spec.build(fields)}
	default:
		for _, k := range sortedKeys(present) {
			l.fail(fullKey, fmt.Errorf("%w: %s needs algorithm", ErrAlgorithm, k))
		}
		// The reference: a unit is valid when its upper-cased text names a
		// protocol unit other than UNKNOWN; unlimited forbids a valid unit,
		// a limit requires one.
		u, err := ParseUnit(deref(y.Unit))
		switch {
		case y.Unlimited && err == nil:
			l.fail(fullKey, fmt.Errorf("%w: unlimited must not name unit %q", ErrUnlimitedWithUnit, bounded(deref(y.Unit))))
		case !y.Unlimited && err != nil:
			l.fail(fullKey, err)
		case !y.Unlimited:
			rl.Unit = u
		}
	}
	return rl
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sortedKeys(m map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// parseMetadata is the reference's parseMetadata: nested mappings with
// non-string keys get their keys printed with %v, and the whole must be a
// valid protobuf Struct (UTF-8 text, supported scalar types).
func parseMetadata(m map[string]interface{}) (*structpb.Struct, error) {
	if len(m) == 0 {
		return nil, nil
	}
	conv := make(map[string]interface{}, len(m))
	for k, v := range m {
		conv[k] = convertValue(v)
	}
	return structpb.NewStruct(conv)
}

func convertValue(v interface{}) interface{} {
	switch v := v.(type) {
	case map[interface{}]interface{}:
		res := make(map[string]interface{}, len(v))
		for k, e := range v {
			res[fmt.Sprintf("%v", k)] = convertValue(e)
		}
		return res
	case []interface{}:
		res := make([]interface{}, len(v))
		for i, e := range v {
			res[i] = convertValue(e)
		}
		return res
	default:
		return v
	}
}
