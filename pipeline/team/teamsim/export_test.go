package teamsim

// Mutant names a deliberate bug; the mutants are for the package's own
// tests, which prove the invariants catch each (docs/simulation.md).
type Mutant = mutant

// The mutants, for the tests.
const (
	MutantFenceByName        = mutantFenceByName
	MutantMergeBeforePersist = mutantMergeBeforePersist
	MutantNoReAck            = mutantNoReAck
	MutantStallIsProgress    = mutantStallIsProgress
	MutantCompleteOnPause    = mutantCompleteOnPause
	MutantSpawnTwice         = mutantSpawnTwice
	MutantNoBudget           = mutantNoBudget
)

// WithMutant switches a deliberate bug on in cfg, for the tests that prove
// the invariants catch it. Only the package's tests can.
func WithMutant(cfg Config, m Mutant) Config {
	cfg.mutant = m
	return cfg
}
