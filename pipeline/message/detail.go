package message

import "strings"

// Detail makes free text (an agent's error, a reviewer's feedback, a
// gate's output) fit the details of a report line so that the line still
// parses: one line, control characters and invalid UTF-8 replaced, runs of
// space collapsed, ". Agents:" (the one phrase the Stage 1 and Stage 3
// lines reserve) defused, and at most max bytes, cut at a character
// boundary and marked with "…" (max <= 0: no limit). Empty text becomes
// "(no details)".
func Detail(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, ". Agents:", ", agents:")
	if max > 0 && len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	if s == "" {
		s = "(no details)"
	}
	return s
}
