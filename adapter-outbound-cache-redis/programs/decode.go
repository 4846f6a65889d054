package programs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// ReplyError reports a program reply that is not exactly ReplyLen integers
// or that fails Reply.Check (then Err is that error). Reply is a bounded
// rendering of what arrived (%#v style, at most maxRenderLen bytes), safe to
// log: the programs never return a key, a subject or a secret.
type ReplyError struct {
	// Reason says what is wrong with the shape; empty when Err is set.
	Reason string
	// Reply is the bounded rendering of the value.
	Reply string
	// Err is Reply.Check's error, or nil for a shape error.
	Err error
}

// Error renders "programs: malformed program reply: <why>: <reply>".
func (e *ReplyError) Error() string {
	if e.Err != nil {
		return "programs: " + e.Err.Error() + ": " + e.Reply
	}
	return "programs: " + ErrMalformedReply.Error() + ": " + e.Reason + ": " + e.Reply
}

// Unwrap exposes ErrMalformedReply and the Check error to errors.Is.
func (e *ReplyError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrMalformedReply}
	}
	return []error{ErrMalformedReply, e.Err}
}

// Decode converts the value go-redis read for a program call into a Reply
// for p. The value must be a []any of exactly ReplyLen int64 elements (Lua
// integer tables arrive that way under RESP2 and RESP3); anything else (a
// string, nil, a nested array, a float, a map, bulk digits, a wrong arity)
// is a *ReplyError. The field rules (range, status, consistency) are
// Check's, and a reply that fails them is a *ReplyError wrapping Check's
// error. On a valid reply it does not allocate. It needs no go-redis types:
// the value is what go-redis hands over as an any.
func Decode(v any, p ratelimit.Policy) (Reply, error) {
	arr, ok := v.([]any)
	if !ok {
		return Reply{}, replyError(v, "want an array of %d integers, got %s", ReplyLen, typeName(v))
	}
	if len(arr) != ReplyLen {
		return Reply{}, replyError(v, "want %d elements, got %d", ReplyLen, len(arr))
	}
	var ints [ReplyLen]int64
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			return Reply{}, replyError(v, "element %d: want an integer, got %s", i, typeName(e))
		}
		ints[i] = n
	}
	r := ReplyOf(ints)
	if err := r.Check(p); err != nil {
		return Reply{}, &ReplyError{Reply: render(v), Err: err}
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
