package ratelimit_test

import (
	"testing"

	_ "github.com/stretchr/testify/require"

	_ "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func TestFixture(t *testing.T) {}
