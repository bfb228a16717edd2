package phases

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Commands is the short way to write a gate plan: one level holding one
// check per command, each named after itself and split into its argv at
// white space. No shell runs it, so nothing is quoted or expanded; for a
// shell command write a GateCheck with Argv {"sh", "-c", "..."}.
//
//	phases.Commands(phases.L1Tests, "go vet ./...", "go test ./...")
//
// A blank command makes a check with no Argv, which Validate refuses.
func Commands(level Level, commands ...string) GatePlan {
	l := GateLevel{Level: level}
	for _, c := range commands {
		l.Checks = append(l.Checks, GateCheck{Name: strings.TrimSpace(c), Argv: strings.Fields(c)})
	}
	return GatePlan{Levels: []GateLevel{l}}
}

// ErrInvalidGatePlan is matched by the errors Validate returns.
var ErrInvalidGatePlan = errors.New("phases: invalid gate plan")

// Validate checks that every level is a known one, at most once, and
// every check has a command.
func (p GatePlan) Validate() error {
	seen := map[Level]bool{}
	for i, l := range p.Levels {
		if !slices.Contains(Levels(), l.Level) {
			return fmt.Errorf("%w: level %d is %q (want one of L0, L1, L2, L3)", ErrInvalidGatePlan, i, l.Level)
		}
		if seen[l.Level] {
			return fmt.Errorf("%w: level %s appears twice", ErrInvalidGatePlan, l.Level)
		}
		seen[l.Level] = true
		for j, c := range l.Checks {
			if len(c.Argv) == 0 || c.Argv[0] == "" {
				return fmt.Errorf("%w: check %d of level %s (%q) has no command", ErrInvalidGatePlan, j, l.Level, c.Name)
			}
		}
	}
	return nil
}
