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
