package vm

import (
	"strings"
	"sync"
)

// Markers of the block cloud-init prints the sshd host keys in on the
// serial console (cloudinit/config/cc_keys_to_console.py).
const (
	hostKeysBegin = "-----BEGIN SSH HOST KEY KEYS-----"
	hostKeysEnd   = "-----END SSH HOST KEY KEYS-----"
)

// ParseHostKeys returns the "type base64" host keys of a console output's
// last SSH HOST KEY KEYS block, without their comments, or nil when the
// console shows no complete block. A line's key is the first field that
// starts with "ssh-" or "ecdsa-" and the field after it, so that the
// timestamps and prefixes some serial consoles put before each line are
// skipped.
func ParseHostKeys(console string) []string {
	i := strings.LastIndex(console, hostKeysBegin)
	if i < 0 {
		return nil
	}
	block, _, ok := strings.Cut(console[i+len(hostKeysBegin):], hostKeysEnd)
	if !ok {
		return nil
	}
	var keys []string
	for _, line := range strings.Split(block, "\n") {
		f := strings.Fields(line)
		for j := 0; j+1 < len(f); j++ {
			if strings.HasPrefix(f[j], "ssh-") || strings.HasPrefix(f[j], "ecdsa-") {
				keys = append(keys, f[j]+" "+f[j+1])
				break
			}
		}
	}
	return keys
}

// HostKeyCache remembers the host keys a provider read from its VMs'
// consoles, by Machine.Ref, so that a VM's console is read until it shows
// the keys and not again after. The zero value is ready to use and safe
// for concurrent use.
type HostKeyCache struct {
	mu   sync.Mutex
	keys map[string][]string
}

// Get returns the host keys of the VM ref: the remembered ones, else those
// ParseHostKeys finds in the console text read returns, remembered when
// there are any. nil (no keys yet) lets the engine fall back to first
// contact. An error of read is returned as is, not turned into "no keys",
// so that throttling never downgrades a pinned host key to first contact.
func (c *HostKeyCache) Get(ref string, read func() (string, error)) ([]string, error) {
	c.mu.Lock()
	keys, ok := c.keys[ref]
	c.mu.Unlock()
	if ok {
		return keys, nil
	}
	console, err := read()
	if err != nil {
		return nil, err
	}
	keys = ParseHostKeys(console)
	if len(keys) > 0 {
		c.mu.Lock()
		if c.keys == nil {
			c.keys = map[string][]string{}
		}
		c.keys[ref] = keys
		c.mu.Unlock()
	}
	return keys, nil
}

// Forget drops the host keys remembered for ref, once its VM is deleted.
func (c *HostKeyCache) Forget(ref string) {
	c.mu.Lock()
	delete(c.keys, ref)
	c.mu.Unlock()
}
