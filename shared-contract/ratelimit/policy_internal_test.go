package ratelimit

import (
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCeilDiv(t *testing.T) {
	tests := []struct{ a, b, want int64 }{
		{0, 1, 0}, {1, 1, 1}, {1, 2, 1}, {2, 2, 1}, {3, 2, 2}, {10, 3, 4}, {9, 3, 3},
		{MaxExactInt, 1, MaxExactInt}, {MaxExactInt, 2, 1 << 52},
		{math.MaxInt64, 1, math.MaxInt64}, // no a+b-1 intermediate: no overflow
		{math.MaxInt64, math.MaxInt64, 1}, {math.MaxInt64 - 1, math.MaxInt64, 1},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ceilDiv(tt.a, tt.b), "ceil(%d/%d)", tt.a, tt.b)
	}
}

func TestMulAddFits(t *testing.T) {
	max := big.NewInt(MaxExactInt)
	vals := []int64{0, 1, 2, 3, 7, 6361, 1 << 26, 1 << 27, 94906265, 94906266, MaxExactInt / 2, MaxExactInt/2 + 1, MaxExactInt, MaxExactInt + 1, math.MaxInt64}
	for _, a := range vals {
		for _, b := range vals {
			p := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
			assert.Equal(t, p.Cmp(max) <= 0, mulFits(a, b), "mulFits(%d, %d)", a, b)
			s := new(big.Int).Add(big.NewInt(a), big.NewInt(b))
			assert.Equal(t, s.Cmp(max) <= 0, addFits(a, b, MaxExactInt), "addFits(%d, %d)", a, b)
		}
	}
}
