package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// encoding/json matches object keys case-insensitively and keeps the last of
// duplicate keys, so a hand-edited second "limit", or "Limit", would change
// a policy silently. checkKeys walks the file token by token first and
// reports both: every object's keys must be unique, and a key that differs
// from a field name only in case is an error. Unknown keys are left to the
// decoder (DisallowUnknownFields), and malformed JSON to its syntax errors.

// maxKeyDepth bounds the nesting checkKeys walks; a policy file needs 4.
const maxKeyDepth = 16

// keyLevel is the object a key belongs to.
type keyLevel int

const (
	levelOther    keyLevel = iota
	levelTop               // the file's object: "policies"
	levelPolicies          // the "policies" array
	levelPolicy            // one policy object
	levelPlans             // the "plans" array
	levelPlan              // one plan object (its index is passed as policy)
	levelLease             // a policy's "lease" object
)

// fieldNames are the exact keys of each level, from the json tags and, for
// a policy, the algorithms' parameter fields.
var fieldNames = map[keyLevel][]string{
	levelTop:    jsonNames(policyFile{}),
	levelPolicy: append(jsonNames(policyFields{}), paramOrder...),
	levelPlan:   jsonNames(planJSON{}),
	levelLease:  jsonNames(leaseJSON{}),
}

func jsonNames(v any) []string {
	t := reflect.TypeOf(v)
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}

// keyProblem is one key error; policy is the index in "policies", or -1.
type keyProblem struct {
	policy int
	msg    string
}

type keyChecker struct {
	dec      *json.Decoder
	ids      map[int]string // policy index -> its "id", where a string
	problems []keyProblem
}

// checkKeys returns the duplicate and wrongly cased keys of data, each
// naming its policy ("policies[1] (login)") and the key. It returns nothing
// for input that is not JSON: the decoder reports that.
func checkKeys(data []byte) []error {
	c := &keyChecker{dec: json.NewDecoder(bytes.NewReader(data)), ids: map[int]string{}}
	c.dec.UseNumber()
	if err := c.value(levelTop, -1, 0); err != nil {
		return nil
	}
	out := make([]error, 0, len(c.problems))
	for _, p := range c.problems {
		where := ""
		switch id, ok := c.ids[p.policy]; {
		case p.policy < 0:
		case ok:
			where = fmt.Sprintf("policies[%d] (%s): ", p.policy, bounded(id))
		default:
			where = fmt.Sprintf("policies[%d]: ", p.policy)
		}
		out = append(out, fmt.Errorf("%w: %s%s", ErrPolicyFile, where, p.msg))
	}
	return out
}

// value reads one JSON value.
func (c *keyChecker) value(level keyLevel, policy, depth int) error {
	tok, err := c.dec.Token()
	if err != nil {
		return err
	}
	return c.rest(tok, level, policy, depth)
}

// rest reads the remainder of the value that starts with tok.
func (c *keyChecker) rest(tok json.Token, level keyLevel, policy, depth int) error {
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= maxKeyDepth {
		return fmt.Errorf("nested deeper than %d", maxKeyDepth)
	}
	switch delim {
	case '[':
		for i := 0; c.dec.More(); i++ {
			child, p := levelOther, policy
			switch level {
			case levelPolicies:
				child, p = levelPolicy, i
			case levelPlans:
				child, p = levelPlan, i
			}
			if err := c.value(child, p, depth+1); err != nil {
				return err
			}
		}
	case '{':
		seen := map[string]bool{}
		for c.dec.More() {
			tok, err := c.dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string)
			owner, prefix := policy, ""
			switch level {
			case levelPlan:
				owner, prefix = -1, fmt.Sprintf("plans[%d]: ", policy)
			case levelLease:
				prefix = "lease: "
			}
			if seen[key] {
				c.problems = append(c.problems, keyProblem{owner, fmt.Sprintf("%sduplicate key %q", prefix, bounded(key))})
			}
			seen[key] = true
			for _, name := range fieldNames[level] {
				if key != name && strings.EqualFold(key, name) {
					c.problems = append(c.problems, keyProblem{owner, fmt.Sprintf("%skey %q is not %q (keys are case-sensitive)", prefix, bounded(key), name)})
				}
			}
			child := levelOther
			switch {
			case level == levelTop && key == "policies":
				child = levelPolicies
			case level == levelTop && key == "plans":
				child = levelPlans
			case level == levelPolicy && key == "lease":
				child = levelLease
			}
			tok, err = c.dec.Token()
			if err != nil {
				return err
			}
			if s, ok := tok.(string); ok && level == levelPolicy && key == "id" {
				c.ids[policy] = s
			}
			if err := c.rest(tok, child, policy, depth+1); err != nil {
				return err
			}
		}
	}
	_, err := c.dec.Token() // the closing delimiter
	return err
}
