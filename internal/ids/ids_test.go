package ids

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		id   string
		ok   bool
		want string
	}{
		{"US-001", true, ""},
		{"a", true, ""},
		{"story_1.2", true, ""},
		{strings.Repeat("a", 64), true, ""},
		{"", false, "empty"},
		{"-rf", false, "'-'"},
		{"--upload-pack=x", false, "'-'"},
		{strings.Repeat("a", 65), false, "64"},
		{"a..b", false, ".."},
		{"../etc", false, ".."},
		{".hidden", false, "must match"},
		{"a/b", false, "must match"},
		{"a b", false, "must match"},
		{"a\nb", false, "must match"},
		{"x.lock", false, ".lock"},
		{"x.", false, ".lock"},
		{"é", false, "must match"},
	}
	for _, tt := range tests {
		err := Validate("item", tt.id)
		if tt.ok {
			assert.NoError(t, err, tt.id)
			continue
		}
		assert.ErrorIs(t, err, ErrInvalid, tt.id)
		assert.ErrorContains(t, err, tt.want, tt.id)
		assert.ErrorContains(t, err, "invalid item id")
	}
}
