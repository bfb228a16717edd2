package teamsim

// Mutant names a deliberate bug the simulator switches on itself; the
// others live in shipped code behind internal/mutant.
type Mutant = mutant

// MutantCompleteOnPause is the one mutant whose guard is still the
// simulator's own (coord.go, until the shared coordinator carries it).
const MutantCompleteOnPause = mutantCompleteOnPause

// WithMutant switches a deliberate bug on in cfg, for the tests that prove
// the invariants catch it. Only the package's tests can.
func WithMutant(cfg Config, m Mutant) Config {
	cfg.mutant = m
	return cfg
}
