package mutant

// Name names one deliberate bug.
type Name string

// The mutants.
const (
	// SpawnTwice: the worker pool accepts an item it already holds
	// (worker.Dispatcher.Submit), and pipeline.DispatcherSpawner a spawn
	// it already ran, so one assignment gets a second agent.
	SpawnTwice Name = "spawn-twice"
	// NoReAck: the pipeline's state guard counts a duplicate report but
	// does not ACK it again (pipeline.Flow.Step).
	NoReAck Name = "no-re-ack"
	// MergeBeforePersist: the pipeline runtime carries out a transition's
	// merge before it persists the transition (pipeline.Runtime.Handle).
	MergeBeforePersist Name = "merge-before-persist"
	// StallIsProgress: the worker pool counts every heartbeat of a busy
	// worker as progress.
	StallIsProgress Name = "stall-is-progress"
	// NoBudget: the worker pool never halts on its TotalBudget.
	NoBudget Name = "no-budget"
	// FenceByName: the pipeline's sender validation takes a message as
	// the current worker's when the worker's name matches, whatever its
	// assignment.
	FenceByName Name = "fence-by-name"
	// CompleteOnPause: the team tells its task graph that a paused story
	// completed. Its guard lives with the team's coordinator.
	CompleteOnPause Name = "complete-on-pause"
)

// Env is the environment variable that names the mutant a build with the
// foreman_mutants tag switches on.
const Env = "FOREMAN_MUTANT"

// All returns every mutant, in the order docs/simulation.md lists them.
func All() []Name {
	return []Name{FenceByName, MergeBeforePersist, NoReAck, StallIsProgress, CompleteOnPause, SpawnTwice, NoBudget}
}
