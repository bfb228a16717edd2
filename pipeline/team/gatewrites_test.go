package team

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestChangedBySaysWhatTheGatesChanged(t *testing.T) {
	st := func(head string, kv ...string) worktreeState {
		s := worktreeState{head: head, paths: map[string]string{}}
		for i := 0; i+1 < len(kv); i += 2 {
			s.paths[kv[i]] = kv[i+1]
		}
		return s
	}
	tests := []struct {
		name          string
		before, after worktreeState
		want          string // a part of the note; "" for none
	}{
		{"nothing", st("a", "x.go", "1"), st("a", "x.go", "1"), ""},
		{"a new file", st("a"), st("a", "loot.txt", "1"), `changed "loot.txt" in the worktree they verified`},
		{"an uncommitted change rewritten", st("a", "x.go", "1"), st("a", "x.go", "2"), `changed "x.go"`},
		{"an uncommitted change undone", st("a", "x.go", "1"), st("a"), `changed "x.go (put back as committed)"`},
		{"HEAD moved", st("aaaaaaaaaaaaaaaa"), st("bbbbbbbbbbbbbbbb"), "moved HEAD from aaaaaaaaaaaa to bbbbbbbbbbbb"},
		{"many", st("a"), st("a", "1", "x", "2", "x", "3", "x", "4", "x", "5", "x", "6", "x", "7", "x"), `"5", and 2 more`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := changedBy(tt.before, tt.after)
			if tt.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tt.want)
			assert.Contains(t, got, "the change that lands is not the one they checked")
		})
	}
}
