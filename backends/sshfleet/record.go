package sshfleet

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"hoist/backends"
	"hoist/backends/offers"
)

// record is what the backend keeps about one instance, in
// <StateDir>/instances/<id>.json (mode 0600: it holds the private key and
// the shim's token).
type record struct {
	ID        string            `json:"id"`
	Name      string            `json:"name,omitempty"`
	Tags      map[string]string `json:"tags"`
	Host      backends.SSHHost  `json:"host"`
	HostKey   string            `json:"host_key,omitempty"`
	JumpKey   string            `json:"jump_host_key,omitempty"`
	Arch      string            `json:"arch,omitempty"`
	Offer     offers.Offer      `json:"offer"`
	Status    string            `json:"status"`
	Message   string            `json:"message,omitempty"`
	Dir       string            `json:"dir,omitempty"`
	CreatedAt time.Time         `json:"created_at"`

	// ShimToken is the bearer token of the host's shim, made by the server
	// (agentauth.NewToken) and deployed to Dir/token (mode 0600).
	ShimToken string `json:"shim_token,omitempty"`
}

type recordStore struct{ dir string }

func (s recordStore) path(id string) string { return filepath.Join(s.dir, safeName(id)+".json") }

func (s recordStore) load() (map[string]*record, error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	out := map[string]*record{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("instance record %s: %w", e.Name(), err)
		}
		out[r.ID] = &r
	}
	return out, nil
}

func (s recordStore) save(r *record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.path(r.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("save instance record: %w", err)
	}
	if err := os.Rename(tmp, s.path(r.ID)); err != nil {
		return fmt.Errorf("save instance record: %w", err)
	}
	return nil
}

func (s recordStore) remove(id string) error {
	if err := os.Remove(s.path(id)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove instance record: %w", err)
	}
	return nil
}

// safeName maps an id to a file and directory name: letters, digits, dot,
// dash and underscore kept, anything else replaced by '_'.
func safeName(id string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, id)
}
