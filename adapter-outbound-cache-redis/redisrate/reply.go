package redisrate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// ErrMalformedReply is wrapped by every *ReplyError; the provider maps it to
// Incompatible{malformed_reply}.
var ErrMalformedReply = errors.New("malformed program reply")

// ReplyError reports a program reply that is not exactly ReplyLen integers
// in range or that fails programs.Reply.Check (then Err is that error, which
// wraps programs.ErrMalformedReply). Reply is a bounded rendering of what
// arrived (%#v style, at most maxRenderLen bytes), safe to log: the programs
// never return a key, a subject or a secret.
type ReplyError struct {
	Reason string
	Reply  string
	Err    error
}

func (e *ReplyError) Error() string {
	reason := e.Reason
	if e.Err != nil {
		reason = e.Err.Error()
	}
	return "redisrate: " + ErrMalformedReply.Error() + ": " + reason + ": " + e.Reply
}

// Unwrap exposes ErrMalformedReply and the Check error to errors.Is.
func (e *ReplyError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrMalformedReply}
	}
	return []error{ErrMalformedReply, e.Err}
}

// parseReply converts the value go-redis read for a program call into a
// programs.Reply. The value must be a []any of exactly programs.ReplyLen
// int64 elements (Lua integer tables arrive that way under RESP2 and RESP3),
// each in 0..MaxExactInt, with a known status. Anything else (a string, nil,
// a nested array, a float, a map, bulk digits, a wrong arity) is a
// *ReplyError. The consistency rules are Reply.Check's. On a valid reply it
// does not allocate.
func parseReply(v any, p ratelimit.Policy) (programs.Reply, error) {
	arr, ok := v.([]any)
	if !ok {
		return programs.Reply{}, replyError(v, "want an array of %d integers, got %s", programs.ReplyLen, typeName(v))
	}
	if len(arr) != programs.ReplyLen {
		return programs.Reply{}, replyError(v, "want %d elements, got %d", programs.ReplyLen, len(arr))
	}
	var ints [programs.ReplyLen]int64
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			return programs.Reply{}, replyError(v, "element %d: want an integer, got %s", i, typeName(e))
		}
		if n < 0 || n > ratelimit.MaxExactInt {
			return programs.Reply{}, replyError(v, "element %d: %d outside 0..%d", i, n, ratelimit.MaxExactInt)
		}
		ints[i] = n
	}
	r := programs.ReplyOf(ints)
	if !r.Status.Valid() {
		return programs.Reply{}, replyError(v, "unknown status %d", ints[programs.ReplyStatus])
	}
	if err := r.Check(p); err != nil {
		return programs.Reply{}, &ReplyError{Reason: "inconsistent fields", Reply: render(v), Err: err}
	}
	return r, nil
}

func replyError(v any, format string, args ...any) error {
	return &ReplyError{Reason: fmt.Sprintf(format, args...), Reply: render(v)}
}

func typeName(v any) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", v)
}

// Bounds of render.
const (
	maxRenderLen      = 256 // bytes of output
	maxRenderElements = 8   // elements shown per array or map
	maxRenderString   = 32  // bytes shown per string
	maxRenderDepth    = 3
)

// render formats v like %#v for the shapes go-redis produces, bounded in
// output size and in work: huge strings and arrays are truncated without
// being copied or fully traversed.
func render(v any) string {
	var b strings.Builder
	renderTo(&b, v, 0)
	s := b.String()
	if len(s) > maxRenderLen {
		s = s[:maxRenderLen] + "..."
	}
	return s
}

func renderTo(b *strings.Builder, v any, depth int) {
	if b.Len() > maxRenderLen {
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("<nil>")
	case int64:
		b.WriteString("int64(")
		b.WriteString(strconv.FormatInt(x, 10))
		b.WriteString(")")
	case string:
		b.WriteString(strconv.Quote(truncate(x)))
		if len(x) > maxRenderString {
			fmt.Fprintf(b, "(%d bytes)", len(x))
		}
	case []byte:
		fmt.Fprintf(b, "[]byte(%q)", truncate(string(x[:min(len(x), maxRenderString+1)])))
	case []any:
		if depth >= maxRenderDepth {
			fmt.Fprintf(b, "[]interface {}(len %d)", len(x))
			return
		}
		b.WriteString("[]interface {}{")
		for i, e := range x {
			if i == maxRenderElements {
				fmt.Fprintf(b, ", ...(%d more)", len(x)-i)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			renderTo(b, e, depth+1)
		}
		b.WriteString("}")
	case map[any]any:
		fmt.Fprintf(b, "map[interface {}]interface {}(len %d)", len(x))
	case map[string]any:
		fmt.Fprintf(b, "map[string]interface {}(len %d)", len(x))
	case bool, float64, float32, int, int32, uint64:
		fmt.Fprintf(b, "%#v", x)
	case error:
		fmt.Fprintf(b, "error(%q)", truncate(x.Error()))
	default:
		fmt.Fprintf(b, "%T", x)
	}
}

func truncate(s string) string {
	if len(s) > maxRenderString {
		return s[:maxRenderString] + "..."
	}
	return s
}
