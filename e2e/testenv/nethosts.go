package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// NetHostsNet is the range the simulated hosts' networks are taken from:
// 198.18.0.0/15, reserved for network benchmark tests (RFC 2544), so that
// no real network of this machine uses it.
const NetHostsNet = "198.18.0.0/15"

// A NetHost is a simulated host: a network namespace of its own with one
// address (IP) on a network shared with the other hosts of NetHosts. The
// host shares the machine's filesystem, processes and Docker Engine; only its
// network is its own.
type NetHost struct {
	// Name is the network namespace's name (`ip netns`).
	Name string
	// IP is the host's address on the hosts' network.
	IP string
}

// NetnsPath returns the file the host's network namespace is bound at.
func (h *NetHost) NetnsPath() string { return "/run/netns/" + h.Name }

// Command returns a command that runs in the host's network namespace
// (through nsenter, which keeps the test's mounts).
func (h *NetHost) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + h.NetnsPath(), "--", name}, args...)...)
}

// StartSSHD starts an OpenSSH server in the host's namespace on IP port 22,
// authorizing the given client keys; it is killed when the test ends.
func (h *NetHost) StartSSHD(t testing.TB, authorized ...ssh.PublicKey) *SSHD {
	t.Helper()
	if _, err := os.Stat(SSHDPath); err != nil {
		Missing(t, "openssh-server not installed (apt-get install openssh-server): %v", err)
	}
	return startSSHD(t, h.IP, 22, h.NetnsPath(), authorized)
}

// NetHosts creates n simulated hosts (network namespaces) on a /24 network
// of their own taken from NetHostsNet: host i has address .i+2 on a veth
// whose other end is on a bridge in a further namespace of the test's (not
// in the root namespace, where Docker's firewall drops bridged traffic).
// The test's own (root) namespace joins the bridge through one more veth
// with address .1, which gives it a route to those hosts and nothing else,
// so the server under test reaches each host's sshd at its address and the
// hosts reach each other. It needs root, ip (iproute2) and nsenter
// (util-linux). The namespaces, their links and any process still in them
// are removed when the test ends, also on failure.
func NetHosts(t testing.TB, n int) []*NetHost {
	t.Helper()
	if n < 1 || n > 250 {
		t.Fatalf("NetHosts: %d hosts, want 1 to 250", n)
	}
	Require(t, "ip")
	Require(t, "nsenter")
	if os.Geteuid() != 0 {
		Missing(t, "network namespaces need root")
	}
	var tag [3]byte
	if _, err := rand.Read(tag[:]); err != nil {
		t.Fatal(err)
	}
	prefix := "hx" + hex.EncodeToString(tag[:]) // also the root namespace's link: at most 15 bytes
	subnet := freeSubnet(t)
	bridgeNS := prefix + "-br"
	var namespaces []string
	t.Cleanup(func() { removeNetHosts(t, prefix, namespaces) })

	ipc := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ipc("netns", "add", bridgeNS)
	namespaces = append(namespaces, bridgeNS)
	ipc("-n", bridgeNS, "link", "set", "lo", "up")
	ipc("-n", bridgeNS, "link", "add", "br0", "type", "bridge")
	ipc("-n", bridgeNS, "link", "set", "br0", "up")
	ipc("link", "add", prefix, "type", "veth", "peer", "name", "up0", "netns", bridgeNS)
	ipc("-n", bridgeNS, "link", "set", "up0", "master", "br0", "up")
	ipc("addr", "add", subnet+"1/24", "dev", prefix)
	ipc("link", "set", prefix, "up")

	hosts := make([]*NetHost, n)
	for i := range n {
		h := &NetHost{Name: prefix + "-" + strconv.Itoa(i), IP: subnet + strconv.Itoa(i+2)}
		ipc("netns", "add", h.Name)
		namespaces = append(namespaces, h.Name)
		ipc("-n", h.Name, "link", "set", "lo", "up")
		port := "h" + strconv.Itoa(i)
		ipc("-n", bridgeNS, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", h.Name)
		ipc("-n", bridgeNS, "link", "set", port, "master", "br0", "up")
		ipc("-n", h.Name, "addr", "add", h.IP+"/24", "dev", "eth0")
		ipc("-n", h.Name, "link", "set", "eth0", "up")
		hosts[i] = h
	}
	return hosts
}

// freeSubnet picks a /24 of NetHostsNet that no address or route of the
// root namespace touches, returned as its first three octets and a dot.
func freeSubnet(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("ip", "-4", "-o", "route", "show", "table", "all").CombinedOutput()
	if err != nil {
		t.Fatalf("ip route: %v: %s", err, out)
	}
	addrs, err := exec.Command("ip", "-4", "-o", "addr", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("ip addr: %v: %s", err, addrs)
	}
	used := string(out) + string(addrs)
	for range 64 {
		k, err := rand.Int(rand.Reader, big.NewInt(512))
		if err != nil {
			t.Fatal(err)
		}
		v := int(k.Int64())
		subnet := fmt.Sprintf("198.%d.%d.", 18+v/256, v%256)
		if !strings.Contains(used, subnet) {
			return subnet
		}
	}
	t.Fatalf("no free /24 in %s", NetHostsNet)
	return ""
}

// removeNetHosts kills what still runs in the namespaces (by PID: only
// the test's processes can be there), deletes the root namespace's link and
// the namespaces; their veths go with them.
func removeNetHosts(t testing.TB, rootLink string, namespaces []string) {
	for _, ns := range namespaces {
		for range 50 {
			out, _ := exec.Command("ip", "netns", "pids", ns).Output()
			pids := strings.Fields(string(out))
			if len(pids) == 0 {
				break
			}
			for _, p := range pids {
				if pid, err := strconv.Atoi(p); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if out, err := exec.Command("ip", "link", "del", rootLink).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
		t.Errorf("ip link del %s: %v: %s", rootLink, err, out)
	}
	for _, ns := range namespaces {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	}
}
