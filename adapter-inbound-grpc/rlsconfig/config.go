package rlsconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

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
