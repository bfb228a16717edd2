package teamsim

// WithMutant switches a deliberate bug on in cfg, for the tests that prove
// the invariants catch it. Only the package's tests can.
func WithMutant(cfg Config, m Mutant) Config {
	cfg.mutant = m
	return cfg
}
