package demo

import "strings"

// ShellQuote makes s one word for a POSIX shell or agentcmd.SplitCommand, whatever it
// contains: a path with spaces or quotes (a TMPDIR, say) in a generated
// script or an -agent command line stays one argument.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
