package teamsim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The repository model (simRepo) is checked against the real thing: the
// same seeded operation sequences — make a worktree, merge, merge again
// after a crash (a new merge.Manager, as a restarted coordinator makes),
// merges that conflict, remove a worktree, lose its directory, make it
// again — go to simRepo
// and to merge.Manager over a temporary git repository behind
// pipeline.Git, the adapter the team uses, and both must tell the pipeline
// the same: the kind of each pipeline.MergeOutcome (merged, Already,
// Conflict and its file, Refused), the same commit for an Already as for
// the merge it repeats, and the same commits per trailer on main.
//
// The real side's agents do what the model assumes: a story's first
// worktree gets one commit of its work, a story marked to conflict
// rewrites conflictFile and the others write a file of their own; after
// a conflict the story's branch is rebased at once (reset onto main, the
// work made again), as the model says whoever resolves it does.
func TestRepoModelAgreesWithMerge(t *testing.T) {
	seqs := 200
	if testing.Short() {
		seqs = 40
	}
	var tally outcomeTally
	t.Run("sequences", func(t *testing.T) {
		for seed := uint64(1); seed <= uint64(seqs); seed++ {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				t.Parallel() // git's processes wait on the disk more than on the CPU
				runRepoSequence(t, seed, &tally)
			})
		}
	})
	t.Logf("%d sequences, outcomes: %v", seqs, tally.n)
	if !t.Failed() {
		for _, k := range []string{"merged", "already merged", "conflict", "refused"} {
			assert.Positive(t, tally.n[k], "no sequence met a %s merge: the sequences do not check it", k)
		}
	}
}

// outcomeTally counts the merge outcomes the sequences met.
type outcomeTally struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomeTally) add(kind string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[kind]++
}

// repoOp is one operation of a sequence.
type repoOp struct {
	kind string // "create", "merge", "crash-merge", "remove", "lose-worktree"
	item foreman.ItemID
}

func (o repoOp) String() string { return o.kind + " " + string(o.item) }

// repoSequence is a seed's stories (which of them conflict) and operations.
func repoSequence(seed uint64) (map[foreman.ItemID]bool, []repoOp) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	marked := map[foreman.ItemID]bool{}
	var items []foreman.ItemID
	for i := range 2 + rng.IntN(3) {
		id := foreman.ItemID(fmt.Sprintf("S%d", i+1))
		items = append(items, id)
		marked[id] = rng.IntN(3) > 0
	}
	kinds := []string{"create", "merge", "merge", "merge", "crash-merge", "remove", "lose-worktree"}
	ops := make([]repoOp, 6+rng.IntN(8))
	made := map[foreman.ItemID]bool{}
	for i := range ops {
		op := repoOp{kind: kinds[rng.IntN(len(kinds))], item: items[rng.IntN(len(items))]}
		if !made[op.item] && rng.IntN(10) > 0 {
			op.kind = "create" // mostly, as the pipeline does, a story's worktree comes first
		}
		made[op.item] = made[op.item] || op.kind == "create"
		ops[i] = op
	}
	return marked, ops
}

func runRepoSequence(t *testing.T, seed uint64, tally *outcomeTally) {
	ctx := context.Background()
	marked, ops := repoSequence(seed)

	cfg, err := Config{Seed: seed, Faults: &Faults{}}.withDefaults()
	require.NoError(t, err)
	w := newWorld(ctx, cfg)
	w.stories = map[foreman.ItemID]*story{}
	for id, m := range marked {
		w.stories[id] = &story{id: id, conflicts: m}
	}
	model := w.repo
	real := newRealRepo(t)

	commits := map[string]string{} // the model's commit id -> the real one
	var trail []string
	for i, op := range ops {
		trail = append(trail, op.String())
		where := fmt.Sprintf("seed %d, step %d: %s", seed, i, strings.Join(trail, "; "))
		switch op.kind {
		case "create":
			require.NoError(t, model.CreateWorktree(ctx, op.item))
			real.create(op.item, marked[op.item])
		case "lose-worktree":
			// A crash in the middle of git worktree add, or a person's
			// rm -rf: the directory is gone, git's registration stays.
			// The model keeps no directories: nothing changes there.
			if dir, ok := real.worktrees[op.item]; ok {
				require.NoError(t, os.RemoveAll(dir))
				delete(real.worktrees, op.item)
			}
		case "remove":
			require.NoError(t, model.RemoveWorktree(ctx, op.item))
			require.NoError(t, real.git.RemoveWorktree(ctx, op.item), where)
			delete(real.worktrees, op.item)
		case "merge", "crash-merge":
			if op.kind == "crash-merge" {
				real.restart()
			}
			want, err := model.Merge(ctx, pipeline.MergeRequest{Item: op.item, Title: "story " + string(op.item)})
			require.NoError(t, err)
			got, err := real.git.Merge(ctx, pipeline.MergeRequest{Item: op.item, Title: "story " + string(op.item)})
			require.NoError(t, err, where)
			require.Equal(t, outcomeKind(want), outcomeKind(got), "%s\n  model: %+v\n  merge: %+v", where, want, got)
			require.Equal(t, want.Conflict, got.Conflict, where)
			tally.add(outcomeKind(got))
			switch {
			case want.Commit != "" && !want.Already:
				commits[want.Commit] = got.Commit
			case want.Already:
				require.Equal(t, commits[want.Commit], got.Commit, "%s: Already names the commit of the first merge", where)
			case len(got.Conflict) > 0:
				real.rebase(op.item, marked[op.item])
			}
		}
	}
	// main only grows: its commits at the end are every commit that landed.
	landed := real.landed()
	for id := range marked {
		require.Len(t, model.merged(id), landed[id], "seed %d: %s: commits with %s's trailer on main", seed, strings.Join(trail, "; "), id)
		require.LessOrEqual(t, landed[id], 1, "seed %d: %s landed twice", seed, id)
	}
}

// outcomeKind is what the pipeline makes of an outcome (Runtime.execute).
func outcomeKind(o pipeline.MergeOutcome) string {
	switch {
	case len(o.Conflict) > 0:
		return "conflict"
	case o.Refused != "":
		return "refused"
	case o.Already:
		return "already merged"
	}
	return "merged"
}

// realRepo is a temporary git repository behind merge.Manager.
type realRepo struct {
	t         *testing.T
	dir       string
	run       *gitexec.Runner
	git       pipeline.Git
	worktrees map[foreman.ItemID]string // path of each existing worktree
	worked    map[foreman.ItemID]bool   // the branch holds the story's work
}

func newRealRepo(t *testing.T) *realRepo {
	dir := filepath.Join(t.TempDir(), "repo")
	id := gitexec.Identity{Name: "Sim", Email: "sim@example.com"}
	files := map[string]string{"README.md": "model check\n", conflictFile: "package shared\n"}
	for i := range 4 {
		files[fmt.Sprintf("S%d.go", i+1)] = "package shared\n" // tracked, so that work is commit -a
	}
	_, err := testrepo.New(dir, "main", testrepo.Commit{Author: id, Files: files})
	require.NoError(t, err)
	r := &realRepo{t: t, dir: dir, run: &gitexec.Runner{Author: id, Env: testrepo.GitEnv()},
		worktrees: map[foreman.ItemID]string{}, worked: map[foreman.ItemID]bool{}}
	r.restart()
	return r
}

// restart opens the repository with a new Manager, as a coordinator
// restarted after a crash does.
func (r *realRepo) restart() {
	mgr, err := merge.New(context.Background(), merge.Config{Repo: r.dir, Author: merge.Identity(r.run.Author),
		GitEnv: testrepo.GitEnv()})
	require.NoError(r.t, err)
	r.git = pipeline.Git{Manager: mgr}
}

func (r *realRepo) gitIn(dir string, args ...string) string {
	out, err := r.run.Run(context.Background(), dir, args...)
	require.NoError(r.t, err, "git %v", args)
	return strings.TrimSpace(out)
}

// create makes the story's worktree; the first one gets its work.
func (r *realRepo) create(item foreman.ItemID, marked bool) {
	wt, err := r.git.Manager.Create(context.Background(), item)
	require.NoError(r.t, err)
	r.worktrees[item] = wt.Path
	if !r.worked[item] {
		r.work(wt.Path, item, marked)
		r.worked[item] = true
	}
}

// work commits the story's change in dir.
func (r *realRepo) work(dir string, item foreman.ItemID, marked bool) {
	name, content := string(item)+".go", "package shared // "+string(item)+"\n"
	if marked {
		name = conflictFile
	}
	require.NoError(r.t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	r.gitIn(dir, "commit", "-q", "-a", "-m", "work on "+string(item))
}

// rebase is the person who resolves a conflict: the story's branch starts
// again at main's tip with its work made again.
func (r *realRepo) rebase(item foreman.ItemID, marked bool) {
	dir, ok := r.worktrees[item]
	if ok {
		r.gitIn(dir, "reset", "-q", "--hard", "main")
		r.work(dir, item, marked)
		return
	}
	tmp := filepath.Join(r.t.TempDir(), "rebase")
	r.gitIn(r.dir, "worktree", "add", "-q", "--detach", tmp, "main")
	r.work(tmp, item, marked)
	r.gitIn(r.dir, "branch", "-f", "foreman/"+string(item), r.gitIn(tmp, "rev-parse", "HEAD"))
	r.gitIn(r.dir, "worktree", "remove", "--force", tmp)
}

// landed counts the commits on main per Foreman-Item trailer.
func (r *realRepo) landed() map[foreman.ItemID]int {
	out := r.gitIn(r.dir, "log", "main", "--format=%(trailers:key=Foreman-Item,valueonly)")
	n := map[foreman.ItemID]int{}
	for _, l := range strings.Fields(out) {
		n[foreman.ItemID(l)]++
	}
	return n
}
