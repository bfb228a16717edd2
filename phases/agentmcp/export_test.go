package agentmcp

// Held is how many assignments s holds whole (begun, not ended).
func (s *Server) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
