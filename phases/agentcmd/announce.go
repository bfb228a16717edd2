package agentcmd

// sessionNamed is the session the agent runs in once its output has named
// one (and true), for the stream event that announces it to a host, which
// may record it and resume the session after a crash; "" and false before.
func sessionNamed(parser OutputParser, f Format) (string, bool) {
	if id := parser.Summary().SessionID; id != "" && checkSessionID(f, id) == nil {
		return id, true
	}
	return "", false
}
