package shim

// SocketLinkDir returns the shim's directory of runner socket links, for
// tests to remove when they end.
func (s *Shim) SocketLinkDir() (string, error) { return s.socketLinkDir() }
