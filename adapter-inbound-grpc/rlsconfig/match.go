package rlsconfig

import "strings"

// Match is the reference's GetLimit for a descriptor without a limit
// override: the limit that applies to entries in domain, or nil when none
// does (the protocol answers OK for that descriptor).
//
// It walks the entries level by level. At each level the entry's
// key_value is looked up first, then the wildcard children of that level
// in file order (the first whose pattern matches key_value; '*' matches
// any run of bytes, also empty), then the key alone. A limit applies only
// when found for the last entry: a request with more entries than the
// configured path gets none, one with fewer gets the limit at its depth.
// The result's FullKey and ShareThresholdKeyPattern are the request's, as
// GetLimit derives them from detailed_metric, value_to_metric and
// share_threshold; when they equal the configured limit's, the configured
// *RateLimit itself is returned.
func (c *Config) Match(domain string, entries []Entry) *RateLimit {
	dom := c.domains[domain]
	if dom == nil {
		return nil
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
		return nil
	}

	fullKey := limit.FullKey
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
			fullKey = b.String()
		} else {
			fullKey = detailed.String()
		}
	} else if k := valueKey.String(); k != limit.FullKey {
		fullKey, dropMetadata = k, true
	}
	if fullKey == limit.FullKey && share == nil && !(dropMetadata && limit.Metadata != nil) {
		return limit
	}
	out := *limit
	out.FullKey = fullKey
	out.ShareThresholdKeyPattern = share
	if dropMetadata {
		out.Metadata = nil
	}
	return &out
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
