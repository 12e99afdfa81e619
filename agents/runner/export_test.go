package runner

import "time"

// SetSSHKeepalive sets the SSH keepalive interval and count of the runners
// a test makes after the call, and restores them when it ends.
func SetSSHKeepalive(t interface{ Cleanup(func()) }, interval time.Duration, max int) {
	oldInterval, oldMax := sshKeepalive, sshKeepaliveMax
	sshKeepalive, sshKeepaliveMax = interval, max
	t.Cleanup(func() { sshKeepalive, sshKeepaliveMax = oldInterval, oldMax })
}
