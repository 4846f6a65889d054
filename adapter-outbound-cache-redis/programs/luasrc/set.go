package luasrc

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"text/template"
)

// SetName is the policy-set program's name (ADR 0026).
const SetName = "rate-set-v1"

// SetMaxMembers is the most members one set program call decides: one
// digit, matched by the program's framing check (ratelimit.MaxSetMembers).
const SetMaxMembers = 8

// MemberName is the Lua function of alg's member in the set program.
func MemberName(alg Algorithm) string {
	return "member_" + strings.ReplaceAll(alg.Slug, "-", "_")
}

// RenderMember renders alg's decision program as a set member: a Lua
// function of (KEYS, ARGV, redis) whose body is the decision program's
// prelude, state and decide step (variant-member.lua.tmpl).
func RenderMember(alg Algorithm) ([]byte, error) {
	name := MemberName(alg)
	t, err := template.New(name).Option("missingkey=error").ParseFS(templates, alg.files("member")...)
	if err != nil {
		return nil, fmt.Errorf("parse templates of %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "program", data{Name: name, Variant: "member", Keys: 1, Args: alg.Args}); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	return b.Bytes(), nil
}

// RenderSet renders the policy-set program (set.lua.tmpl): the member
// function (RenderMember) of every algorithm but those that delay
// (Algorithm.Delays), in Algorithms order (a member's algorithm code is
// its position among them, from 1: the model's setCode), and the
// all-or-nothing frame.
func RenderSet() (File, error) {
	var members, funcs, argc []string
	for _, alg := range Algorithms {
		if alg.Delays {
			continue
		}
		m, err := RenderMember(alg)
		if err != nil {
			return File{}, err
		}
		members = append(members, string(m))
		funcs = append(funcs, MemberName(alg))
		argc = append(argc, strconv.Itoa(alg.Args))
	}
	t, err := template.New(SetName).Option("missingkey=error").ParseFS(templates, "set.lua.tmpl")
	if err != nil {
		return File{}, fmt.Errorf("parse templates of %s: %w", SetName, err)
	}
	var b bytes.Buffer
	err = t.ExecuteTemplate(&b, "set", map[string]any{
		"Name": SetName, "Max": SetMaxMembers, "Members": members,
		"Functions": strings.Join(funcs, ", "), "ArgCounts": strings.Join(argc, ", "), "Count": len(funcs),
	})
	if err != nil {
		return File{}, fmt.Errorf("render %s: %w", SetName, err)
	}
	return File{Name: SetName, Source: b.Bytes()}, nil
}
