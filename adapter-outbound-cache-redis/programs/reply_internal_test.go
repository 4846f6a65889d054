package programs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRenderIsBounded(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	long := make([]any, 100_000)
	for i := range long {
		long[i] = int64(i)
	}
	deep := any(int64(1))
	for i := 0; i < 100; i++ {
		deep = []any{deep}
	}
	for name, v := range map[string]any{
		"huge bulk": huge, "huge bytes": []byte(huge), "long array": long, "deep": deep,
		"array of huge": []any{huge, huge, huge, huge, huge, huge, huge},
	} {
		t.Run(name, func(t *testing.T) {
			s := render(v)
			assert.LessOrEqual(t, len(s), maxRenderLen+3)
			assert.NotEmpty(t, s)
		})
	}
	assert.Equal(t, `[]interface {}{int64(1), "OK", <nil>}`, render([]any{int64(1), "OK", nil}))
}
