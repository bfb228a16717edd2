package agentcmd

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/agentforeman/foreman/internal/atomicfile"
)

// gitLayout is where the repository of a workspace keeps what a commit in
// it writes.
type gitLayout struct {
	// commonDir is the repository's git directory (objects, refs, config);
	// gitDir the workspace's own (a linked worktree's admin directory
	// .git/worktrees/<name>, or commonDir itself for the main worktree).
	commonDir, gitDir string
	// branch is the branch checked out in the workspace (refs/heads/...),
	// "" for a detached HEAD; before its value then.
	branch, before string
	// shadow is the private copy of the repository's git directory the
	// agent writes (gitshadow.go).
	shadow *gitShadow
}

// linked reports whether the workspace is a linked worktree.
func (g *gitLayout) linked() bool { return g.gitDir != g.commonDir }

// hostGit runs git for the driver itself, with none of the host's GIT_*
// variables that would point it elsewhere.
func hostGit(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = hostGitEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// hostGitEnv is the host's environment without the GIT_ variables that
// would point its git elsewhere (the global and system config stay).
func hostGitEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") && k != "GIT_CONFIG_GLOBAL" && k != "GIT_CONFIG_NOSYSTEM" && k != "GIT_CONFIG_SYSTEM" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// discoverGit finds the repository of workspace ws; nil when ws is in none.
func discoverGit(ctx context.Context, ws string) (*gitLayout, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, nil
	}
	// One git for the common case: the directories, HEAD's commit and
	// its branch. An unborn branch has no commit: then three.
	out, err := hostGit(ctx, ws, "rev-parse", "--path-format=absolute", "--git-common-dir", "--git-dir", "HEAD",
		"--symbolic-full-name", "HEAD")
	if f := strings.Split(out, "\n"); err == nil && len(f) == 4 {
		g := &gitLayout{commonDir: filepath.Clean(f[0]), gitDir: filepath.Clean(f[1])}
		if strings.HasPrefix(f[3], "refs/heads/") && validRefName(f[3]) {
			g.branch, g.before = f[3], f[2]
		}
		return g, nil
	}
	if err != nil && strings.Contains(err.Error(), "not a git repository") {
		return nil, nil
	}
	out, err = hostGit(ctx, ws, "rev-parse", "--path-format=absolute", "--git-common-dir", "--git-dir")
	if err != nil {
		return nil, nil // not a repository (or none git can read): nothing to bind
	}
	dirs := strings.Split(out, "\n")
	if len(dirs) != 2 {
		return nil, fmt.Errorf("git rev-parse: unexpected output %q", out)
	}
	g := &gitLayout{commonDir: filepath.Clean(dirs[0]), gitDir: filepath.Clean(dirs[1])}
	if b, err := hostGit(ctx, ws, "symbolic-ref", "-q", "HEAD"); err == nil && strings.HasPrefix(b, "refs/heads/") && validRefName(b) {
		g.branch = b
		if v, err := hostGit(ctx, ws, "--git-dir="+g.commonDir, "rev-parse", "-q", "--verify", b); err == nil {
			g.before = v
		}
	}
	return g, nil
}

// refNamePattern is what the driver accepts as a branch to carry back.
var refNamePattern = regexp.MustCompile(`^refs/heads/[A-Za-z0-9._/-]+$`)

func validRefName(ref string) bool {
	return refNamePattern.MatchString(ref) && !strings.Contains(ref, "..") && !strings.HasSuffix(ref, ".lock") &&
		!strings.Contains(ref, "//")
}

// mounts are the binds that let the agent commit on its branch in ws and
// nothing more: the repository's git directory a private copy (gitShadow)
// around the real object store. In a linked worktree (the team's) the
// workspace's own git directory is writable besides; in the main worktree
// its own files are in the copy. cleanup removes the copy.
func (g *gitLayout) mounts(ws string) ([]mount, func(), error) {
	sh, ms, err := newGitShadow(g.commonDir, g.branch, !g.linked())
	if err != nil {
		return nil, nil, err
	}
	g.shadow = sh
	if !g.linked() {
		return ms, sh.remove, nil
	}
	ms = append(ms,
		mount{kind: mountRW, src: g.gitDir, dst: g.gitDir},
		// The files that say which repository this is: the host's gits
		// read them after the agent.
		mount{kind: mountROTry, src: filepath.Join(g.gitDir, "commondir"), dst: filepath.Join(g.gitDir, "commondir")},
		mount{kind: mountROTry, src: filepath.Join(g.gitDir, "gitdir"), dst: filepath.Join(g.gitDir, "gitdir")},
		mount{kind: mountROTry, src: filepath.Join(ws, ".git"), dst: filepath.Join(ws, ".git")},
	)
	return ms, sh.remove, nil
}

// addLooseRefs reads the loose refs under root, whose full names are
// prefix and their path under it, into refs by full name (a symbolic
// ref's value is "ref: <target>").
func addLooseRefs(refs map[string]string, root, prefix string) {
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() || strings.HasSuffix(p, ".lock") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil
		}
		if data, err := readSmall(p, 4096); err == nil {
			refs[prefix+filepath.ToSlash(rel)] = strings.TrimSpace(string(data))
		}
		return nil
	})
}

// maxRefNotes bounds the notes about other refs the agent moved.
const maxRefNotes = 5

// agentRefs are the refs the agent could write, before it and as it left
// them in its copy.
func (g *gitLayout) agentRefs() (before, after map[string]string) {
	if g.shadow == nil {
		return nil, nil
	}
	return g.shadow.refs, g.shadow.refsAfter()
}

// otherRefs says which refs, other than its own branch, the agent created,
// moved or deleted in its private copy (a ref that is as the host has it
// now, in hostNow, is none of these): none is carried back.
// who is whose they are: "agent", or "check" for a gate check's.
func otherRefs(before, after, hostNow map[string]string, own, who string) []string {
	var notes []string
	note := func(format string, args ...any) {
		if len(notes) < maxRefNotes {
			notes = append(notes, fmt.Sprintf(format, args...))
		}
	}
	what := func(name string) string {
		if strings.HasPrefix(name, "refs/heads/") {
			return " (another branch)"
		}
		return ""
	}
	asHost := func(name string) bool {
		v, ok := hostNow[name]
		w, ok2 := after[name]
		return hostNow != nil && ok == ok2 && v == w
	}
	for _, name := range slices.Sorted(maps.Keys(after)) {
		switch b, had := before[name]; {
		case name == own, asHost(name):
		case !had:
			note("refused the %s's new ref %s: not carried back", who, name)
		case after[name] != b:
			note("refused the %s's move of %s%s: not carried back", who, name, what(name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[name]; !ok && name != own && !asHost(name) {
			note("refused the %s's deletion of %s%s: not carried back", who, name, what(name))
		}
	}
	return notes
}

// objectIDPattern is a full object name (SHA-1 or SHA-256).
var objectIDPattern = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// carryBack runs once the agent is gone: it puts the workspace's HEAD back
// on its branch if the agent moved it, and moves the branch to the commit
// the agent left in its private copy (git checks that it exists and is a
// commit). It returns what it had to refuse or repair, for the log and the
// agent's transcript: what else the agent wrote in its copy among them.
func (g *gitLayout) carryBack(ctx context.Context, seen *placeAccess) []string {
	notes := g.headBack("agent")
	if !g.linked() && g.shadow != nil {
		if err := g.shadow.carryIndex(); err != nil {
			notes = append(notes, fmt.Sprintf("could not carry the agent's index back: %v", err))
		}
	}
	before, after := g.agentRefs()
	notes = append(notes, otherRefs(before, after, g.hostRefs(), g.branch, "agent")...)
	if g.shadow != nil {
		notes = append(notes, g.shadow.fileNotes(seen)...)
		// Before the branch moves: its commits' objects must be there.
		notes = append(notes, g.shadow.migrateObjects(ctx)...)
	}
	value, ok := after[g.branch]
	if g.branch == "" || !ok || value == g.before {
		return notes // unchanged, or removed: the branch stays
	}
	if !objectIDPattern.MatchString(value) {
		return append(notes, fmt.Sprintf("refused the agent's %s: %q is no object name", g.branch, truncate(value, 80)))
	}
	if _, err := hostGit(ctx, g.commonDir, "--git-dir="+g.commonDir, "update-ref", "-m", "agentcmd: commits of the sandboxed agent",
		g.branch, value, g.before); err != nil {
		if _, missing := hostGit(ctx, g.commonDir, "--git-dir="+g.commonDir, "cat-file", "-e", value); missing != nil {
			// Said plainly: the agent deleted or forged the objects of
			// its own commits, and the ref would name nothing.
			return append(notes, fmt.Sprintf("refused the agent's %s: its commit %s is not in the repository (the objects the agent wrote were deleted or refused)",
				g.branch, value))
		}
		return append(notes, fmt.Sprintf("refused the agent's %s: %v", g.branch, err))
	}
	return notes
}

// checkBack runs once a gate check is gone: it puts the workspace's HEAD
// back if the check moved it and says what else the check wrote in its
// copy of the git directory. Nothing is carried back, not even the
// branch's own commits: a check verifies the agent's work, it does not
// add to it.
//
// Only what the check left in the copy is named, not what the watch saw
// written and found as it was (an agent's "put back"): nothing of a
// check's copy is carried back, so a write it undid changed nothing, and
// a fresh-clone CI once saw its copy's config written and put back while
// a cooperative go vet ran (by what, not found).
func (g *gitLayout) checkBack(_ context.Context) []string {
	notes := g.headBack("check")
	before, after := g.agentRefs()
	if v, ok := after[g.branch]; g.branch != "" && (!ok || v != g.before) {
		notes = append(notes, fmt.Sprintf("refused the check's move of %s, the branch under verification: not carried back", g.branch))
	}
	notes = append(notes, otherRefs(before, after, g.hostRefs(), g.branch, "check")...)
	if g.shadow != nil {
		notes = append(notes, g.shadow.fileNotes(&placeAccess{})...)
	}
	return notes
}

// headBack puts a linked worktree's HEAD back on its branch if who (the
// agent, a check) moved it, and says so; in the main worktree, whose HEAD
// is in the private copy, it says that the real one stayed.
func (g *gitLayout) headBack(who string) []string {
	if g.branch == "" {
		return nil
	}
	want := "ref: " + g.branch + "\n"
	if !g.linked() {
		if g.shadow == nil {
			return nil
		}
		if data, err := os.ReadFile(filepath.Join(g.shadow.dir, "HEAD")); err != nil || string(data) != want {
			return []string{fmt.Sprintf("the %s moved HEAD (%q) in its copy; HEAD stays on %s", who, strings.TrimSpace(string(data)), g.branch)}
		}
		return nil
	}
	head := filepath.Join(g.gitDir, "HEAD")
	data, err := os.ReadFile(head)
	if err == nil && string(data) == want {
		return nil
	}
	if err := atomicfile.WriteFile(head, []byte(want), 0o644); err != nil {
		return []string{fmt.Sprintf("could not put HEAD back on %s: %v", g.branch, err)}
	}
	return []string{fmt.Sprintf("the %s moved HEAD (%q); put back on %s", who, strings.TrimSpace(string(data)), g.branch)}
}

// hostRefs are the real repository's refs now, when the agent had a copy:
// a ref its git rewrote with the host's current value (a git pack-refs
// reads the real refs through their links) is not its move.
func (g *gitLayout) hostRefs() map[string]string {
	if g.shadow == nil {
		return nil
	}
	return readRefs(g.commonDir)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
