package teamsim_test

import (
	"context"
	"flag"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team/teamsim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "replay this one seed with its trace (TestSeeds)")
	seedsFlag = flag.Int("seeds", 0, "how many seeds TestSeeds runs (default 150, or $FOREMAN_SIM_SEEDS)")
	startFlag = flag.Uint64("start", 1, "the first seed TestSeeds runs")
)

// seedCount is how many seeds TestSeeds runs: -seeds, else
// FOREMAN_SIM_SEEDS (CI runs 10,000), else 150 (50 with -short).
func seedCount(t *testing.T) int {
	if *seedsFlag > 0 {
		return *seedsFlag
	}
	if v := os.Getenv("FOREMAN_SIM_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "FOREMAN_SIM_SEEDS")
		return n
	}
	if testing.Short() {
		return 50
	}
	return 150
}

// TestSeeds runs many seeds, every invariant checked after every step; a
// failing seed is reported with the command that replays it.
func TestSeeds(t *testing.T) {
	ctx := context.Background()
	if *seedFlag != 0 {
		res, err := teamsim.Run(ctx, teamsim.Config{Seed: *seedFlag, Trace: true})
		require.NoError(t, err)
		for _, l := range res.Trace {
			t.Log(l)
		}
		t.Logf("seed %d: %s after %d steps, %d crashes; %+v", res.Seed, res.End, res.Steps, res.Crashes, res.Stories)
		assert.NoError(t, res.Err())
		return
	}
	n := seedCount(t)
	var (
		next     atomic.Uint64
		mu       sync.Mutex
		failures int
		steps    atomic.Int64
		wg       sync.WaitGroup
	)
	next.Store(*startFlag)
	last := *startFlag + uint64(n)
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				seed := next.Add(1) - 1
				if seed >= last {
					return
				}
				res, err := teamsim.Run(ctx, teamsim.Config{Seed: seed})
				steps.Add(int64(res.Steps))
				mu.Lock()
				if err != nil || res.Err() != nil {
					failures++
					if failures <= 5 {
						t.Errorf("seed %d: %v %v", seed, err, res.Err())
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	t.Logf("%d seeds in %s (%.0f seeds/s, %d steps, %d failed)", n, el.Round(time.Millisecond), float64(n)/el.Seconds(), steps.Load(), failures)
}

// TestReplayGivesTheSameTrace: a seed replayed gives the same trace, and
// different seeds give different ones.
func TestReplayGivesTheSameTrace(t *testing.T) {
	ctx := context.Background()
	for _, seed := range []uint64{1, 7, 42, 1234} {
		a, err := teamsim.Run(ctx, teamsim.Config{Seed: seed, Trace: true})
		require.NoError(t, err)
		b, err := teamsim.Run(ctx, teamsim.Config{Seed: seed, Trace: true})
		require.NoError(t, err)
		assert.Equal(t, a.TraceHash, b.TraceHash, "seed %d", seed)
		assert.Equal(t, a.Trace, b.Trace, "seed %d", seed)
		c, err := teamsim.Run(ctx, teamsim.Config{Seed: seed + 1})
		require.NoError(t, err)
		assert.NotEqual(t, a.TraceHash, c.TraceHash, "seeds %d and %d", seed, seed+1)
	}
}

// TestWithoutFaultsEveryStoryMerges: with nothing going wrong, every story
// is merged once and the team finishes.
func TestWithoutFaultsEveryStoryMerges(t *testing.T) {
	faults := teamsim.NoFaults()
	for seed := uint64(1); seed <= 20; seed++ {
		res, err := teamsim.Run(context.Background(), teamsim.Config{Seed: seed, Faults: &faults, TotalBudget: -1})
		require.NoError(t, err)
		require.NoError(t, res.Err())
		assert.Equal(t, "finished", res.End, "seed %d", seed)
		assert.Zero(t, res.Crashes)
		for _, s := range res.Stories {
			assert.Equal(t, pipeline.StatusDone, s.Status, "seed %d story %s", seed, s.ID)
			assert.Equal(t, 1, s.Commits, "seed %d story %s", seed, s.ID)
		}
	}
}

func TestBadConfigIsATypedError(t *testing.T) {
	for name, cfg := range map[string]teamsim.Config{
		"stories":     {Stories: -1},
		"workers":     {Workers: -2},
		"a long flow": {Flow: &pipeline.Flow{}},
	} {
		_, err := teamsim.Run(context.Background(), cfg)
		assert.ErrorIs(t, err, teamsim.ErrConfig, name)
		var ce *teamsim.ConfigError
		assert.ErrorAs(t, err, &ce, name)
	}
}

// A pool that spent its budget halts; the simulation says so rather than
// ending "quiet" with stories still running.
func TestASpentBudgetEndsTheSimulationSayingSo(t *testing.T) {
	t.Parallel()
	faults := teamsim.NoFaults()
	res, err := teamsim.Run(context.Background(), teamsim.Config{Seed: 7, Faults: &faults, TotalBudget: 3_000, Stories: 3})
	require.NoError(t, err)
	require.NoError(t, res.Err())
	assert.Equal(t, "budget spent", res.End)
	assert.Less(t, res.Count(pipeline.StatusDone), len(res.Stories), "some stories wait for a person to raise the budget")

	unlimited, err := teamsim.Run(context.Background(), teamsim.Config{Seed: 7, Faults: &faults, TotalBudget: -1, Stories: 3})
	require.NoError(t, err)
	assert.Equal(t, "finished", unlimited.End)
	assert.Equal(t, len(unlimited.Stories), unlimited.Count(pipeline.StatusDone))
}
