package message

// Parse parses one canonical line into its typed message.
func Parse(line string) (Message, error) {
	return nil, &ParseError{Line: line, Reason: "not implemented yet"}
}

// Format renders m as its canonical line.
func Format(m Message) string {
	return ""
}
