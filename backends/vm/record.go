package vm

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/backends"
	"hoist/backends/offers"
)

// record is what the engine keeps about one instance in backends.Records
// (encrypted at rest: it holds the instance's private key).
type record struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Ref     string `json:"ref,omitempty"`
	Region  string `json:"region,omitempty"`
	Address string `json:"address,omitempty"`
	// PrivateAddress is the VM's private IP (Machine.PrivateAddress).
	PrivateAddress string            `json:"private_address,omitempty"`
	Offer          offers.Offer      `json:"offer"`
	User           string            `json:"user"`
	PrivateKey     []byte            `json:"private_key"`
	PublicKey      string            `json:"public_key"`
	Tags           map[string]string `json:"tags"`
	CreatedAt      time.Time         `json:"created_at"`
	LaunchedAt     time.Time         `json:"launched_at,omitzero"`
	// Running is set once the VM was taken over and its shim answered:
	// from then on the boot timeout no longer applies.
	Running bool `json:"running,omitempty"`
	// Deleting is set once Terminate asked the provider to delete the VM.
	Deleting bool `json:"deleting,omitempty"`
}

// groupRecord is what the engine keeps about one placement group.
type groupRecord struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Ref    string `json:"ref,omitempty"`
	Region string `json:"region"`
}

// volumeRecord is what the engine keeps about one volume.
type volumeRecord struct {
	ID     string            `json:"id"`
	Name   string            `json:"name"`
	Ref    string            `json:"ref,omitempty"`
	Region string            `json:"region"`
	Owned  bool              `json:"owned"`
	Tags   map[string]string `json:"tags,omitempty"`
}

// recordTimeout bounds one read or write of a record. Writes do not follow
// the caller's context: a launched VM must be recorded even when the caller
// gives up.
const recordTimeout = 30 * time.Second

// recordStore reads and writes the records of one backend name.
type recordStore struct {
	backend string
	recs    backends.Records
}

func (s recordStore) getJSON(id string, v any) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	raw, ok, err := s.recs.GetBackendRecord(ctx, s.backend, id)
	if err != nil {
		return false, fmt.Errorf("vm: read record %s: %w", id, err)
	}
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("vm: record %s: %w", id, err)
	}
	return true, nil
}

func (s recordStore) putJSON(id string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	if err := s.recs.PutBackendRecord(ctx, s.backend, id, raw); err != nil {
		return fmt.Errorf("vm: save record %s: %w", id, err)
	}
	return nil
}

func (s recordStore) get(id string) (*record, bool, error) {
	var r record
	ok, err := s.getJSON(id, &r)
	if !ok {
		return nil, false, err
	}
	return &r, true, nil
}

func (s recordStore) save(r *record) error { return s.putJSON(r.ID, r) }

func (s recordStore) getGroup(id string) (*groupRecord, bool, error) {
	var g groupRecord
	ok, err := s.getJSON(id, &g)
	if !ok {
		return nil, false, err
	}
	return &g, true, nil
}

func (s recordStore) getVolume(id string) (*volumeRecord, bool, error) {
	var v volumeRecord
	ok, err := s.getJSON(id, &v)
	if !ok {
		return nil, false, err
	}
	return &v, true, nil
}

func (s recordStore) remove(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	if err := s.recs.DeleteBackendRecord(ctx, s.backend, id); err != nil {
		return fmt.Errorf("vm: remove record %s: %w", id, err)
	}
	return nil
}

// newKey generates an instance's ed25519 SSH key: the private key in
// OpenSSH PEM form and the public key as an authorized_keys line ending in
// comment.
func newKey(comment string) (private []byte, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, "", err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, "", err
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " " + comment
	return pem.EncodeToMemory(block), line, nil
}

// cloudConfig returns the user data authorizing keys for the image's default
// user, as dstack's get_user_data does
// (src/dstack/_internal/core/backends/base/compute.py): a #cloud-config
// document with ssh_authorized_keys.
func cloudConfig(keys []string) string {
	var b strings.Builder
	b.WriteString("#cloud-config\nssh_authorized_keys:\n")
	for _, k := range keys {
		k = strings.TrimSpace(k)
		if k == "" || strings.ContainsAny(k, "\n\"") {
			continue
		}
		fmt.Fprintf(&b, "  - %q\n", k)
	}
	return b.String()
}
