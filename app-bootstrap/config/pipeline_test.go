package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadPipelineMaxBatch(t *testing.T) {
	cfg, err := Load(enabledEnv())
	require.NoError(t, err)
	assert.Equal(t, 16, cfg.RateLimit.PipelineMaxBatch, "default: on")

	cfg, err = Load(with(enabledEnv(), "APP_RATE_LIMIT_PIPELINE_MAX_BATCH", "32"))
	require.NoError(t, err)
	assert.Equal(t, 32, cfg.RateLimit.PipelineMaxBatch)
	assert.Contains(t, cfg.String(), "pipeline_max_batch=32")

	cfg, err = Load(with(enabledEnv(), "APP_RATE_LIMIT_PIPELINE_MAX_BATCH", "1"))
	require.NoError(t, err, "1 turns batching off")
	assert.Equal(t, 1, cfg.RateLimit.PipelineMaxBatch)
}

func TestLoadPipelineMaxBatchRejections(t *testing.T) {
	for _, v := range []string{"0", "-1", "1025"} {
		t.Run(v, func(t *testing.T) {
			_, err := Load(with(enabledEnv(), "APP_RATE_LIMIT_PIPELINE_MAX_BATCH", v))
			require.Error(t, err)
			ves := VarErrors(err)
			require.Len(t, ves, 1, "%v", err)
			assert.Equal(t, "APP_RATE_LIMIT_PIPELINE_MAX_BATCH", ves[0].Var)
			assert.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), "want 1..1024")
		})
	}
}
