// Package sshd runs throwaway OpenSSH servers (Debian's /usr/sbin/sshd) for
// tests and the cloud simulator: it writes a minimal pubkey-only
// sshd_config, starts `sshd -D -e`, waits until it accepts connections, and
// kills it with every per-connection process it forked.
//
// e2e/testenv (StartSSHD) and e2e/cloudsim/sim (the simulated VMs) import
// it; nothing of the daemon does.
package sshd
