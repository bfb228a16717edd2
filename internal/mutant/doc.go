// Package mutant switches on the deliberate bugs ("mutants") that prove the
// whole-team simulator (pipeline/team/teamsim) checks the code that ships:
// each bug sits at its real place in the shipped packages (the worker
// pool, the pipeline's core and runtime, pipeline.DispatcherSpawner),
// guarded by
//
//	if mutant.Active(mutant.SpawnTwice) { ...the bug... }
//
// Only a build with the foreman_mutants tag can switch one on, and then
// only through the FOREMAN_MUTANT environment variable naming it:
//
//	FOREMAN_MUTANT=no-budget go test -tags foreman_mutants -run TestMutantsAreCaught ./pipeline/team/teamsim
//
// Without the tag, Active is a function that returns false: the compiler
// inlines it and removes the guarded code, so a plain build holds no
// mutant and the environment variable does nothing (the package's tests
// check both). docs/simulation.md lists the mutants, where each lives and
// the simulated run (by its Config.Seed) whose invariants catch it.
package mutant
