package sshfleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"hoist/backends"
	"hoist/backends/offers"
)

// record is what the backend keeps about one instance, in the shared
// backends.Records (it holds the host's private key, its pinned host key and
// the shim's token; the store encrypts it at rest).
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

// recordTimeout bounds one read or write of a record. Writes do not follow
// the caller's context: a host taken over must be recorded even when the
// caller gives up.
const recordTimeout = 30 * time.Second

// recordStore reads and writes the records of one backend.
type recordStore struct {
	backend string
	recs    backends.Records
}

func (s recordStore) load(ctx context.Context) (map[string]*record, error) {
	all, err := s.recs.ListBackendRecords(ctx, s.backend)
	if err != nil {
		return nil, fmt.Errorf("load instance records: %w", err)
	}
	out := make(map[string]*record, len(all))
	for id, raw := range all {
		var r record
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("instance record %s: %w", id, err)
		}
		out[r.ID] = &r
	}
	return out, nil
}

func (s recordStore) get(id string) (*record, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	raw, ok, err := s.recs.GetBackendRecord(ctx, s.backend, id)
	if err != nil || !ok {
		return nil, false, err
	}
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, false, fmt.Errorf("instance record %s: %w", id, err)
	}
	return &r, true, nil
}

func (s recordStore) save(r *record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	if err := s.recs.PutBackendRecord(ctx, s.backend, r.ID, b); err != nil {
		return fmt.Errorf("save instance record: %w", err)
	}
	return nil
}

func (s recordStore) remove(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	if err := s.recs.DeleteBackendRecord(ctx, s.backend, id); err != nil {
		return fmt.Errorf("remove instance record: %w", err)
	}
	return nil
}

// migrateFiles moves the records an older hoist kept in
// <dir>/<id>.json into the shared records, removing each file once stored.
// A missing directory is nothing to migrate.
func (s recordStore) migrateFiles(dir string) (int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return n, err
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			return n, fmt.Errorf("instance record %s: %w", path, err)
		}
		if _, ok, err := s.get(r.ID); err != nil {
			return n, err
		} else if !ok {
			if err := s.save(&r); err != nil {
				return n, err
			}
			n++
		}
		if err := os.Remove(path); err != nil {
			return n, fmt.Errorf("remove migrated record: %w", err)
		}
	}
	return n, nil
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
