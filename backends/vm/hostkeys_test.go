package vm

import (
	"errors"
	"slices"
	"testing"
)

func TestParseHostKeys(t *testing.T) {
	cases := []struct {
		name, console string
		want          []string
	}{
		{name: "crlf block with comments",
			console: "x\r\n-----BEGIN SSH HOST KEY KEYS-----\r\nssh-ed25519 AAAA root@h\r\necdsa-sha2-nistp256 BBBB root@h\r\n-----END SSH HOST KEY KEYS-----\r\n",
			want:    []string{"ssh-ed25519 AAAA", "ecdsa-sha2-nistp256 BBBB"}},
		{name: "prefixed serial lines",
			console: "[  1.0] ci: -----BEGIN SSH HOST KEY KEYS-----\n[  1.1] ci: ssh-rsa CCCC root@h\n[  1.2] ci: -----END SSH HOST KEY KEYS-----\n",
			want:    []string{"ssh-rsa CCCC"}},
		{name: "last block wins",
			console: "-----BEGIN SSH HOST KEY KEYS-----\nssh-ed25519 OLD\n-----END SSH HOST KEY KEYS-----\n-----BEGIN SSH HOST KEY KEYS-----\nssh-ed25519 NEW\n-----END SSH HOST KEY KEYS-----\n",
			want:    []string{"ssh-ed25519 NEW"}},
		{name: "unterminated block", console: "-----BEGIN SSH HOST KEY KEYS-----\nssh-ed25519 AAAA\n"},
		{name: "no block", console: "booting\n"},
	}
	for _, c := range cases {
		if got := ParseHostKeys(c.console); !slices.Equal(got, c.want) {
			t.Errorf("%s: ParseHostKeys = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestHostKeyCache(t *testing.T) {
	var c HostKeyCache
	reads := 0
	console := "booting\n"
	read := func() (string, error) { reads++; return console, nil }
	if keys, err := c.Get("z/a", read); err != nil || keys != nil {
		t.Fatalf("Get before the keys = %q, %v", keys, err)
	}
	console = "-----BEGIN SSH HOST KEY KEYS-----\nssh-ed25519 AAAA\n-----END SSH HOST KEY KEYS-----\n"
	if keys, err := c.Get("z/a", read); err != nil || len(keys) != 1 {
		t.Fatalf("Get = %q, %v", keys, err)
	}
	if keys, _ := c.Get("z/a", read); len(keys) != 1 || reads != 2 {
		t.Errorf("remembered Get = %q after %d reads, want 2 reads", keys, reads)
	}
	boom := errors.New("throttled")
	if _, err := c.Get("z/b", func() (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Errorf("Get with a failing read = %v", err)
	}
	c.Forget("z/a")
	if c.Get("z/a", read); reads != 3 {
		t.Errorf("Get after Forget did not read the console again (%d reads)", reads)
	}
}
