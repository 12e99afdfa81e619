package testenv_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/e2e/testenv"
)

// TestNetHosts_hostsReachEachOtherAndTheTestReachesTheirSSHD checks the
// two-host test bed: each host has its own address; a host reaches the
// other's TCP port at its address; the test's namespace reaches each host's
// sshd and logs in; and once the test is over, the namespaces, the root
// namespace's link and the processes in them are gone.
func TestNetHosts_hostsReachEachOtherAndTheTestReachesTheirSSHD(t *testing.T) {
	busybox := testenv.Require(t, "busybox")
	var hosts []*testenv.NetHost
	var rootLinks []string
	t.Run("bed", func(t *testing.T) {
		hosts = testenv.NetHosts(t, 2)
		rootLinks = hostLinks(t)
		if hosts[0].IP == hosts[1].IP || !strings.HasPrefix(hosts[0].IP, "198.1") {
			t.Fatalf("host addresses %s and %s, want two of %s", hosts[0].IP, hosts[1].IP, testenv.NetHostsNet)
		}
		for _, h := range hosts {
			out, err := h.Command("ip", "-4", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
			if err != nil || !strings.Contains(string(out), " "+h.IP+"/24") {
				t.Fatalf("host %s: eth0 %q (%v), want %s", h.Name, out, err, h.IP)
			}
		}

		// Host 1 listens; host 0 connects to host 1's address. The
		// listener's stdin stays open: busybox nc shuts its sending side
		// as soon as its stdin ends, and a client that sees that before it
		// has sent its line exits without sending it.
		ln := hosts[1].Command(busybox, "nc", "-l", "-p", "7001")
		var got bytes.Buffer
		ln.Stdout = &got
		stdin, hold, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hold.Close() })
		ln.Stdin = stdin
		if err := ln.Start(); err != nil {
			t.Fatal(err)
		}
		stdin.Close()
		t.Cleanup(func() { _ = ln.Process.Kill(); _ = ln.Wait() })
		var sendErr error
		for range 100 { // until the listener is up
			send := hosts[0].Command(busybox, "nc", hosts[1].IP, "7001")
			send.Stdin = strings.NewReader("hello from host 0\n")
			if sendErr = send.Run(); sendErr == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if sendErr != nil {
			t.Fatalf("host 0 → %s:7001: %v", hosts[1].IP, sendErr)
		}
		if err := ln.Wait(); err != nil || got.String() != "hello from host 0\n" {
			t.Fatalf("host 1 received %q (%v)", got.String(), err)
		}

		// The test's namespace logs in to each host's sshd at its address.
		key := testenv.NewSSHKey(t, t.TempDir(), "id")
		for _, h := range hosts {
			d := h.StartSSHD(t, key.Signer.PublicKey())
			c, err := ssh.Dial("tcp", d.Addr(), &ssh.ClientConfig{
				User:            testenv.LoginUser(t),
				Auth:            []ssh.AuthMethod{ssh.PublicKeys(key.Signer)},
				HostKeyCallback: ssh.FixedHostKey(d.HostKey()),
				Timeout:         5 * time.Second,
			})
			if err != nil {
				t.Fatalf("ssh %s: %v", d.Addr(), err)
			}
			sess, err := c.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			out, err := sess.Output("ip -4 -o addr show dev eth0")
			c.Close()
			if err != nil || !strings.Contains(string(out), " "+h.IP+"/24") {
				t.Fatalf("ssh %s: eth0 %q (%v), want %s: the session runs on the host", d.Addr(), out, err, h.IP)
			}
		}
		// The test's namespace routes the bed's network through the bed's link.
		out, err := exec.Command("ip", "-4", "-o", "route", "get", hosts[0].IP).CombinedOutput()
		if err != nil || strings.Contains(string(out), " via ") {
			t.Fatalf("route to host 0: %q (%v), want the bed's link, no gateway", out, err)
		}
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(hosts[0].IP, "22"), 2*time.Second); err != nil {
			t.Fatalf("dial host 0's sshd: %v", err)
		} else {
			c.Close()
		}
	})
	if len(hosts) == 0 {
		return
	}
	for _, h := range hosts {
		if _, err := os.Stat(h.NetnsPath()); !os.IsNotExist(err) {
			t.Errorf("namespace %s left behind: %v", h.Name, err)
		}
	}
	// The bed's link in the root namespace is named for the hosts' common
	// prefix (their names less "-<i>"). Other links come and go with tests
	// of other packages running meanwhile, so only that one is looked for.
	bed := hosts[0].Name[:strings.LastIndex(hosts[0].Name, "-")]
	if !slices.ContainsFunc(rootLinks, func(l string) bool { return linkNamed(l, bed) }) {
		t.Fatalf("root links during the test %v: no link %s of the bed", rootLinks, bed)
	}
	if left := hostLinks(t); slices.ContainsFunc(left, func(l string) bool { return linkNamed(l, bed) }) {
		t.Errorf("root links after the test %v: the bed's link %s is left", left, bed)
	}
}

// linkNamed reports whether line, one line of `ip -o link show`
// ("<index>: <name>[@<peer>]: <flags> ..."), is the link name.
func linkNamed(line, name string) bool {
	_, rest, ok := strings.Cut(line, ": ")
	if !ok {
		return false
	}
	n, _, _ := strings.Cut(rest, ":")
	n, _, _ = strings.Cut(n, "@")
	return n == name
}

// hostLinks lists the root namespace's links.
func hostLinks(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
