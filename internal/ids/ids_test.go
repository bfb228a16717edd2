package ids

import (
	"regexp"
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

// The hand-written matcher agrees with the documented regular expression on
// every short string over an alphabet that exercises each character class.
func TestMatchesPatternAgreesWithRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	alphabet := []string{"a", "Z", "0", ".", "_", "-", "/", " ", "é", "\x00"}
	var walk func(prefix string, depth int)
	walk = func(prefix string, depth int) {
		if prefix != "" {
			assert.Equal(t, re.MatchString(prefix), matchesPattern(prefix), "%q", prefix)
		}
		if depth == 0 {
			return
		}
		for _, c := range alphabet {
			walk(prefix+c, depth-1)
		}
	}
	walk("", 3)
}

func BenchmarkValidate(b *testing.B) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	b.Run("regexp-baseline", func(b *testing.B) {
		for b.Loop() {
			_ = re.MatchString("US-001.story_a")
		}
	})
	b.Run("validate", func(b *testing.B) {
		for b.Loop() {
			_ = Validate("item", "US-001.story_a")
		}
	})
}
