package stress

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSizeFollowsTheEnvironment(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  int
	}{
		{"", 10},
		{"0", 10},
		{"1", 1000},
		{"yes", 1000},
	} {
		t.Run("value="+tt.value, func(t *testing.T) {
			t.Setenv(EnvVar, tt.value)
			assert.Equal(t, tt.want, Size(10, 1000))
			assert.Equal(t, tt.want == 1000, Enabled())
		})
	}
}

func TestLongSkipsUnlessEnabled(t *testing.T) {
	for _, tt := range []struct {
		value string
		runs  bool
	}{
		{"", false},
		{"0", false},
		{"1", true},
	} {
		t.Run("value="+tt.value, func(t *testing.T) {
			t.Setenv(EnvVar, tt.value)
			ran := false
			ok := t.Run("inner", func(t *testing.T) {
				Long(t)
				ran = true
			})
			assert.True(t, ok)
			assert.Equal(t, tt.runs, ran)
		})
	}
}
