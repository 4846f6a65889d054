package rlsconfig

import (
	"errors"
	"fmt"
	"sort"

	"gopkg.in/yaml.v2"
)

// The file's shape, field for field and type for type the reference's
// YamlRoot, YamlDescriptor, YamlRateLimit and yamlReplaces (decoded by the
// same yaml.v2, so the same scalars coerce and the same mismatches are
// refused). Pointers mark the fields whose presence matters to our
// extensions; yaml.v2 accepts exactly the same text into *T as into T.
type yamlRoot struct {
	Domain      string           `yaml:"domain"`
	Descriptors []yamlDescriptor `yaml:"descriptors"`
}

type yamlDescriptor struct {
	Key            string                 `yaml:"key"`
	Value          string                 `yaml:"value"`
	RateLimit      *yamlRateLimit         `yaml:"rate_limit"`
	Descriptors    []yamlDescriptor       `yaml:"descriptors"`
	ShadowMode     bool                   `yaml:"shadow_mode"`
	QuotaMode      bool                   `yaml:"quota_mode"`
	DetailedMetric bool                   `yaml:"detailed_metric"`
	ValueToMetric  bool                   `yaml:"value_to_metric"`
	ShareThreshold bool                   `yaml:"share_threshold"`
	Metadata       map[string]interface{} `yaml:"metadata"`
}

type yamlRateLimit struct {
	RequestsPerUnit *uint32        `yaml:"requests_per_unit"`
	Unit            *string        `yaml:"unit"`
	Unlimited       bool           `yaml:"unlimited"`
	Name            string         `yaml:"name"`
	Replaces        []yamlReplaces `yaml:"replaces"`

	// Our extensions (extensionKeys), absent from every file the reference
	// loads.
	Policy    *string `yaml:"policy"`
	Algorithm *string `yaml:"algorithm"`
	Capacity  *int64  `yaml:"capacity"`
	Refill    *int64  `yaml:"refill"`
	Rate      *int64  `yaml:"rate"`
	Burst     *int64  `yaml:"burst"`
	Limit     *int64  `yaml:"limit"`
	Period    *string `yaml:"period"`
	Window    *string `yaml:"window"`
}

type yamlReplaces struct {
	Name string `yaml:"name"`
}

// validKeys is the reference's validKeys table, unchanged: a key in any
// mapping of a file must be one of these, at any depth (the reference does
// not check where a key appears; a misplaced one is ignored by decoding).
var validKeys = map[string]bool{
	"domain":            true,
	"key":               true,
	"value":             true,
	"descriptors":       true,
	"rate_limit":        true,
	"unit":              true,
	"requests_per_unit": true,
	"unlimited":         true,
	"shadow_mode":       true,
	"quota_mode":        true,
	"name":              true,
	"replaces":          true,
	"detailed_metric":   true,
	"value_to_metric":   true,
	"share_threshold":   true,
	"metadata":          true,
}

// extensionKeys are our keys, valid only directly inside a rate_limit
// mapping, so a file the reference refuses for an unknown key elsewhere is
// refused here too.
var extensionKeys = map[string]bool{
	"policy":    true,
	"algorithm": true,
	"capacity":  true,
	"refill":    true,
	"rate":      true,
	"burst":     true,
	"limit":     true,
	"period":    true,
	"window":    true,
}

// parseFile decodes one file the reference's way (ConfigFileContentToYaml):
// into a generic map whose keys are checked, then into the typed shape.
func parseFile(f File) (*yamlRoot, error) {
	generic := map[interface{}]interface{}{}
	if err := yaml.Unmarshal(f.Data, &generic); err != nil {
		return nil, &FileError{File: f.Name, Err: fmt.Errorf("%w: %w", ErrYAML, err)}
	}
	domain, _ := generic["domain"].(string)
	var errs []error
	validateKeys(generic, "", false, func(path string, err error) {
		errs = append(errs, &FileError{File: f.Name, Domain: domain, Key: path, Err: err})
	})
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var root yamlRoot
	if err := yaml.Unmarshal(f.Data, &root); err != nil {
		return nil, &FileError{File: f.Name, Domain: domain, Err: fmt.Errorf("%w: %w", ErrYAML, err)}
	}
	return &root, nil
}

// validateKeys is the reference's validateYamlKeys, reporting every fault
// instead of the first (in sorted key order) and locating it by a path such
// as descriptors[0].rate_limit.unit. inRateLimit says m is the value of a
// rate_limit key, where extensionKeys are allowed.
func validateKeys(m map[interface{}]interface{}, path string, inRateLimit bool, fail func(string, error)) {
	keys := make([]interface{}, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
	for _, k := range keys {
		v := m[k]
		ks, ok := k.(string)
		if !ok {
			fail(join(path, fmt.Sprint(k)), fmt.Errorf("%w: key %v is a %T, not a string", ErrUnknownKey, k, k))
			continue
		}
		at := join(path, ks)
		if !validKeys[ks] && !(inRateLimit && extensionKeys[ks]) {
			fail(at, fmt.Errorf("%w %q", ErrUnknownKey, bounded(ks)))
			continue
		}
		if ks == "metadata" {
			// Arbitrary keys; its values are checked when it becomes a
			// protobuf Struct, as in the reference.
			continue
		}
		switch v := v.(type) {
		case []interface{}:
			for i, e := range v {
				em, ok := e.(map[interface{}]interface{})
				if !ok {
					fail(fmt.Sprintf("%s[%d]", at, i), fmt.Errorf("%w: a list may hold only mappings, not %T %v", ErrBadValue, e, e))
					continue
				}
				validateKeys(em, fmt.Sprintf("%s[%d]", at, i), ks == "rate_limit", fail)
			}
		case map[interface{}]interface{}:
			validateKeys(v, at, ks == "rate_limit", fail)
		case string, int, bool, nil:
			// Leaves the reference accepts.
		default:
			fail(at, fmt.Errorf("%w: %T %v is not a string, an integer, a boolean or null", ErrBadValue, v, v))
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
