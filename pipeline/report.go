package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/atomicfile"
	"github.com/agentforeman/foreman/merge"
)

// DiffStater measures an item's change; merge.Manager and Git are ones.
type DiffStater interface {
	DiffStat(ctx context.Context, item foreman.ItemID) (merge.DiffStat, error)
}

// FileReporter appends each item's section to
// <Root>/docs/tasks/reports/pipeline-{date}.md, named with the
// date of the item's start (so that a re-issued append after a restart finds
// the same file). Each section carries its key in an HTML comment, and a
// section whose key is already in the file is not appended again. The file
// is rewritten atomically.
type FileReporter struct {
	// Root is the target repository (or any directory); required.
	Root string
	// Dir is the reports directory under Root; default "docs/tasks/reports".
	Dir string
	// Diff measures the item's branch for the "Code:" line; nil omits it.
	Diff DiffStater
	mu   sync.Mutex
}

// Path returns the report file for a run started at t.
func (fr *FileReporter) Path(t time.Time) string {
	dir := fr.Dir
	if dir == "" {
		dir = filepath.Join("docs", "tasks", "reports")
	}
	return filepath.Join(fr.Root, dir, "pipeline-"+t.UTC().Format(time.DateOnly)+".md")
}

// AppendReport implements Reporter.
func (fr *FileReporter) AppendReport(ctx context.Context, e ReportEntry) error {
	if fr.Root == "" {
		return errors.New("pipeline: FileReporter.Root is required")
	}
	var diff *merge.DiffStat
	if fr.Diff != nil {
		d, err := fr.Diff.DiffStat(ctx, e.State.Item)
		if err == nil {
			diff = &d
		} else if !errors.Is(err, merge.ErrNoBranch) {
			return err
		}
	}
	section := RenderReport(e, diff)
	fr.mu.Lock()
	defer fr.mu.Unlock()
	path := fr.Path(e.State.Started)
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if bytes.Contains(old, []byte(reportMarker(e.Key))) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if len(old) == 0 {
		old = []byte("# Pipeline report " + e.State.Started.UTC().Format(time.DateOnly) + "\n")
	}
	return atomicfile.WriteFile(path, append(append(old, '\n'), section...), 0o644)
}

func reportMarker(key string) string { return "<!-- foreman-report " + key + " -->" }

// RenderReport renders an item's report section (phase4a_git_merge.md's
// "Append Story Report"): a table of the stages with their results, start
// times, durations and counters, the diff statistics when known, and the
// problems.
func RenderReport(e ReportEntry, diff *merge.DiffStat) string {
	s, f := e.State, e.Flow
	var b strings.Builder
	b.WriteString(reportMarker(e.Key) + "\n")
	title := ""
	if s.Title != "" {
		title = ": " + s.Title
	}
	fmt.Fprintf(&b, "### %s%s — %s\n\n", s.Item, title, s.Status)
	b.WriteString("| Stage | Result | Started | Duration | Details |\n|-------|--------|---------|----------|---------|\n")
	for i := range f.Stages {
		rec := s.stage(i)
		result, started, dur := "skip", "—", "—"
		if rec.Result != "" {
			result = rec.Result
		}
		if !rec.Start.IsZero() {
			started = rec.Start.UTC().Format(time.RFC3339)
			if !rec.End.IsZero() {
				dur = stageDuration(rec.End.Sub(rec.Start))
			}
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", i, cell(result), started, dur, stageDetails(f, s, i))
	}
	b.WriteString("\n")
	if diff != nil {
		fmt.Fprintf(&b, "- **Code:** +%d / -%d (%d files)\n", diff.Insertions, diff.Deletions, diff.Files)
	}
	if s.Commit != "" {
		fmt.Fprintf(&b, "- **Commit:** %s\n", s.Commit)
	}
	problems := "None"
	if s.Pause != nil {
		problems = s.Pause.Message
	}
	fmt.Fprintf(&b, "- **Problems:** %s\n", strings.ReplaceAll(problems, "\n", " "))
	return b.String()
}

// stageDuration prints a stage's duration: to the millisecond below a
// minute (agents often take seconds, or less when scripted), to the second
// above.
func stageDuration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// stageDetails names the counters of stage i as the report shows them:
// retries where the stage retries, rework cycles where a later stage reworks
// to it, crashes on the last stage.
func stageDetails(f *Flow, s State, i int) string {
	var parts []string
	for _, r := range f.Stages[i].Rules {
		if r.Action == Retry {
			parts = append(parts, "retries: "+strconv.Itoa(s.stage(i).Failures))
			break
		}
	}
	for j := i + 1; j < len(f.Stages); j++ {
		for _, r := range f.Stages[j].Rules {
			if r.Action == Rework && r.Target == i {
				parts = append(parts, "rework cycles: "+strconv.Itoa(s.stage(j).Failures))
			}
		}
	}
	if i == len(f.Stages)-1 {
		parts = append(parts, "crashes: "+strconv.Itoa(s.Crash.Crashes))
	}
	return strings.Join(parts, ", ")
}

// cell keeps text from breaking a markdown table row.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
