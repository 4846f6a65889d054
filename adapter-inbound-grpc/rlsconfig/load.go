package rlsconfig

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"google.golang.org/protobuf/types/known/structpb"
)

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
