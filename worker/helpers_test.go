package worker_test

import (
	"strings"

	"github.com/agentforeman/foreman/health/healthmock"
	"github.com/golang/mock/gomock"
)

// shellQuote makes s one word of a shell script, whatever it contains (a
// TMPDIR with spaces, say).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func workermockHealth(ctrl *gomock.Controller) *healthmock.MockEscalator {
	return healthmock.NewMockEscalator(ctrl)
}
