package team_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
)

// A flow whose worker names cannot name a worker is refused by New with a
// ConfigError that carries the *pipeline.FlowError naming the stage, rather
// than accepted and then hanging at that stage.
func TestConfigFlowWorkerNamesAreChecked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	flow := pipeline.StoryFlow(pipeline.StoryConfig{})
	flow.Stages = append([]pipeline.StageSpec(nil), flow.Stages...)
	rules := append([]pipeline.Rule(nil), flow.Stages[3].Rules...)
	for i := range rules {
		if rules[i].Action == pipeline.Rework {
			rules[i].Worker = "fix {detail}" // report text, spaces
		}
	}
	flow.Stages[3].Rules = rules
	cfg := f.cfg
	cfg.Flow = flow
	_, err := team.New(context.Background(), cfg)
	require.ErrorIs(t, err, team.ErrInvalidConfig)
	require.ErrorIs(t, err, pipeline.ErrInvalidFlow)
	var ce *team.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "Flow", ce.Field)
	var fe *pipeline.FlowError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, 3, fe.Stage)
	assert.Equal(t, "quality", fe.Name)
	assert.Contains(t, err.Error(), `stage 3 (quality): Rules[3].Worker: "fix {detail}" uses a field other than {id}`)
}
