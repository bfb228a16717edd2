package health

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStuckQGConfigDefaults(t *testing.T) {
	tests := []struct {
		in   StuckQGConfig
		want StuckQGConfig
	}{
		{StuckQGConfig{}, StuckQGConfig{Identical: 3, Window: 10}},
		{StuckQGConfig{Identical: 5, Window: 20}, StuckQGConfig{Identical: 5, Window: 20}},
		{StuckQGConfig{Identical: 12}, StuckQGConfig{Identical: 12, Window: 12}},
		{StuckQGConfig{Identical: -1, Window: -1}, StuckQGConfig{Identical: 3, Window: 10}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+v", tt.in), func(t *testing.T) {
			assert.Equal(t, tt.want, NewStuckQG(tt.in).Config())
		})
	}
}

func TestStuckQG(t *testing.T) {
	tests := []struct {
		name    string
		outputs []string
		stuck   []bool
	}{
		{"three identical in a row", []string{"x", "x", "x"}, []bool{false, false, true}},
		{"stays stuck while repeating", []string{"x", "x", "x", "x"}, []bool{false, false, true, true}},
		{"third identical within the window after an interruption", []string{"x", "x", "y", "x", "x"}, []bool{false, false, false, true, true}},
		{"alternating failures", []string{"x", "y", "x", "y", "x", "y"}, []bool{false, false, false, false, true, true}},
		{"all different", []string{"x", "y", "z", "w"}, []bool{false, false, false, false}},
		{"old repeats leave the window", append(append([]string{"x"}, repeatDistinct(8)...), "x", "x"),
			make([]bool, 11)},
		{"recovers after a change", []string{"x", "x", "x", "y"}, []bool{false, false, true, false}},
		{"long history wraps the window", append(repeatDistinct(15), "z", "z", "z"),
			append(make([]bool, 17), true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewStuckQG(StuckQGConfig{})
			var got []bool
			for _, o := range tt.outputs {
				v := d.Record("bead-1", []byte(o))
				assert.LessOrEqual(t, v.Seen, 10)
				got = append(got, v.Stuck)
			}
			assert.Equal(t, tt.stuck, got)
		})
	}
}

func repeatDistinct(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("out-%d", i)
	}
	return out
}

func TestStuckQGSubjectsAreSeparateAndResettable(t *testing.T) {
	d := NewStuckQG(StuckQGConfig{})
	for i := 0; i < 2; i++ {
		d.Record("a", []byte("same"))
		d.Record("b", []byte("same"))
	}
	v := d.Record("a", []byte("same"))
	assert.True(t, v.Stuck)
	assert.Equal(t, 3, v.Streak)
	d.Reset("a")
	v = d.Record("a", []byte("same"))
	assert.False(t, v.Stuck)
	assert.Equal(t, QGVerdict{Repeats: 1, Streak: 1, Seen: 1}, v)
	assert.True(t, d.Record("b", []byte("same")).Stuck)
}

func TestStuckQGStreakCappedAtWindow(t *testing.T) {
	d := NewStuckQG(StuckQGConfig{Identical: 2, Window: 4})
	var v QGVerdict
	for i := 0; i < 9; i++ {
		v = d.Record("a", []byte("same"))
	}
	assert.Equal(t, QGVerdict{Stuck: true, Repeats: 4, Streak: 4, Seen: 4}, v)
}

// TestStuckQGWindowChangesVerdict: the same outputs are stuck or not
// depending on how many recent outputs the window compares.
func TestStuckQGWindowChangesVerdict(t *testing.T) {
	tests := []struct {
		name    string
		window  int
		outputs []string
		want    QGVerdict
	}{
		{"alternating, strictly consecutive window", 3, []string{"x", "y", "x", "y", "x"},
			QGVerdict{Repeats: 2, Streak: 1, Seen: 3}},
		{"alternating, default window", 10, []string{"x", "y", "x", "y", "x"},
			QGVerdict{Stuck: true, Repeats: 3, Streak: 1, Seen: 5}},
		{"first repeat ten outputs back, default window", 10, append(append([]string{"x"}, repeatDistinct(8)...), "x", "x"),
			QGVerdict{Repeats: 2, Streak: 2, Seen: 10}},
		{"first repeat ten outputs back, window 11", 11, append(append([]string{"x"}, repeatDistinct(8)...), "x", "x"),
			QGVerdict{Stuck: true, Repeats: 3, Streak: 2, Seen: 11}},
		{"in a row, strictly consecutive window", 3, []string{"y", "x", "x", "x"},
			QGVerdict{Stuck: true, Repeats: 3, Streak: 3, Seen: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewStuckQG(StuckQGConfig{Window: tt.window})
			var v QGVerdict
			for _, o := range tt.outputs {
				v = d.Record("bead-1", []byte(o))
			}
			assert.Equal(t, tt.want, v)
		})
	}
}

func TestStuckQGResetFreesSubjects(t *testing.T) {
	d := NewStuckQG(StuckQGConfig{})
	for i := range 100 {
		d.Record(fmt.Sprintf("bead-%d", i), []byte("out"))
	}
	assert.Equal(t, 100, d.Len())
	for i := range 100 {
		d.Reset(fmt.Sprintf("bead-%d", i))
	}
	assert.Equal(t, 0, d.Len())
}
