package rlsconfig

import (
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// Match is the limit that applies to entries in domain: one of Limits(),
// the same pointer, or nil when no limit applies (the protocol answers OK
// for that descriptor). It is Lookup(domain, entries).Limit; a server that
// reports stats keys or honours share_threshold wants Lookup.
func (c *Config) Match(domain string, entries []Entry) *RateLimit {
	return c.Lookup(domain, entries).Limit
}

// Matched is what the reference's GetLimit gives one request's descriptor
// (without a limit override): the configured limit and what the request
// itself derives from it.
type Matched struct {
	// Limit is the configured limit, one of Config.Limits; nil: none
	// applies, and the other fields are zero.
	Limit *RateLimit
	// StatsKey is the reference's stats key for this request: Limit.FullKey,
	// or the request's values where detailed_metric, value_to_metric or
	// share_threshold put them (e.g. domain.route_draw.method_GET).
	StatsKey string
	// ShareThresholdKeyPattern is, per request entry, the wildcard value
	// (e.g. "files*") that replaces the entry's value in the counter, or ""
	// to keep it; nil when no entry shares.
	ShareThresholdKeyPattern []string
	// Metadata is Limit.Metadata, or nil where the reference drops it (it
	// rebuilds a limit whose stats key it changed without its metadata).
	Metadata *structpb.Struct
}

// CounterEntries are the entries whose values name the request's counter:
// entries, with the value of each entry matched through a share_threshold
// wildcard replaced by the wildcard (so every value it matches shares one
// counter). entries is not modified.
func (m Matched) CounterEntries(entries []Entry) []Entry {
	if m.ShareThresholdKeyPattern == nil {
		return entries
	}
	out := make([]Entry, len(entries))
	for i, e := range entries {
		if i < len(m.ShareThresholdKeyPattern) && m.ShareThresholdKeyPattern[i] != "" {
			e.Value = m.ShareThresholdKeyPattern[i]
		}
		out[i] = e
	}
	return out
}

// CounterKey is the reference's cache key for the request, without its
// prefix and window start (limiter.CacheKeyGenerator):
// domain_key1_value1_key2_value2_, over CounterEntries.
func (m Matched) CounterKey(domain string, entries []Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	b.WriteByte('_')
	for _, e := range m.CounterEntries(entries) {
		b.WriteString(e.Key)
		b.WriteByte('_')
		b.WriteString(e.Value)
		b.WriteByte('_')
	}
	return b.String()
}

// Lookup is the reference's GetLimit for a descriptor without a limit
// override.
//
// It walks the entries level by level. At each level the entry's
// key_value is looked up first, then the wildcard children of that level
// in file order (the first whose pattern matches key_value; '*' matches
// any run of bytes, also empty), then the key alone. A limit applies only
// when found for the last entry: a request with more entries than the
// configured path gets none, one with fewer gets the limit at its depth.
func (c *Config) Lookup(domain string, entries []Entry) Matched {
	dom := c.domains[domain]
	if dom == nil {
		return Matched{}
	}
	var (
		limit        *RateLimit
		share        []string // by entry index; nil until an entry shares
		dropMetadata bool
		detailed     strings.Builder
		valueKey     strings.Builder
	)
	detailed.WriteString(domain)
	valueKey.WriteString(domain)
	children, prev := dom.children, dom
	for i, e := range entries {
		finalKey := e.Key + "_" + e.Value
		detailed.WriteByte('.')
		detailed.WriteString(finalKey)

		next := children[finalKey]
		matchedWildcard := ""
		if next == nil {
			for _, w := range prev.wildcards {
				if wildcardMatch(w.parts, finalKey) {
					next, matchedWildcard = children[w.key], w.key
					break
				}
			}
		}
		matchedUsingValue := next != nil
		if next == nil {
			next = children[e.Key]
		}

		if matchedWildcard != "" && next != nil && next.shareThreshold && next.wildcardPattern != "" {
			if share == nil {
				share = make([]string, len(entries))
			}
			share[i] = strings.TrimPrefix(next.wildcardPattern, e.Key+"_")
		}

		valueKey.WriteByte('.')
		valueKey.WriteString(e.Key)
		if next != nil {
			var v string
			switch {
			case matchedWildcard != "" && share != nil && share[i] != "":
				v = share[i]
			case matchedWildcard != "" && next.valueToMetric:
				v = e.Value
			case matchedWildcard != "":
				v = strings.TrimPrefix(matchedWildcard, e.Key+"_")
			case matchedUsingValue:
				v = e.Value
			case next.valueToMetric:
				v = e.Value
			}
			if v != "" {
				valueKey.WriteByte('_')
				valueKey.WriteString(v)
			}
		}

		if next != nil && next.limit != nil && i == len(entries)-1 {
			limit = next.limit
		}
		if next == nil || len(next.children) == 0 {
			// The reference rebuilds a detailed_metric limit here, which
			// drops its metadata.
			if limit != nil && limit.DetailedMetric {
				dropMetadata = true
			}
			break
		}
		children, prev = next.children, next
	}
	if limit == nil {
		return Matched{}
	}

	m := Matched{Limit: limit, StatsKey: limit.FullKey, ShareThresholdKeyPattern: share, Metadata: limit.Metadata}
	if limit.DetailedMetric {
		if share != nil {
			var b strings.Builder
			b.WriteString(domain)
			for i, e := range entries {
				b.WriteByte('.')
				b.WriteString(e.Key)
				switch {
				case share[i] != "":
					b.WriteByte('_')
					b.WriteString(share[i])
				case e.Value != "":
					b.WriteByte('_')
					b.WriteString(e.Value)
				}
			}
			m.StatsKey = b.String()
		} else {
			m.StatsKey = detailed.String()
		}
	} else if k := valueKey.String(); k != limit.FullKey {
		m.StatsKey, dropMetadata = k, true
	}
	if dropMetadata {
		m.Metadata = nil
	}
	return m
}

// ApplyReplaces is the reference's constructLimitsToCheck after GetLimit:
// given the Match result for each descriptor of one request, it returns
// the limits to check (nil for no limit, an unlimited limit, or a limit
// whose Name another matched limit replaces) and which descriptors are
// unlimited. limits is not modified.
func ApplyReplaces(limits []*RateLimit) (check []*RateLimit, unlimited []bool) {
	check = make([]*RateLimit, len(limits))
	unlimited = make([]bool, len(limits))
	replacing := map[string]bool{}
	for i, l := range limits {
		if l == nil {
			continue
		}
		for _, r := range l.Replaces {
			replacing[r] = true
		}
		if l.Unlimited {
			unlimited[i] = true
			continue
		}
		check[i] = l
	}
	for i, l := range check {
		if l != nil && l.Name != "" && replacing[l.Name] {
			check[i] = nil
		}
	}
	return check, unlimited
}

// wildcardMatch is the reference's: parts is a pattern split on '*'; each
// '*' matches zero or more bytes.
func wildcardMatch(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	if !strings.HasPrefix(value, parts[0]) || !strings.HasSuffix(value, parts[len(parts)-1]) {
		return false
	}
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	if len(value) < total {
		return false
	}
	remaining := value[len(parts[0]):]
	if last := parts[len(parts)-1]; last != "" {
		remaining = remaining[:len(remaining)-len(last)]
	}
	for _, p := range parts[1 : len(parts)-1] {
		idx := strings.Index(remaining, p)
		if idx < 0 {
			return false
		}
		remaining = remaining[idx+len(p):]
	}
	return true
}
