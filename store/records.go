package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// backendRecordRow is what a backend driver keeps about one instance,
// encrypted like a secret (the SSH fleet's records hold private keys), with
// the backend and id as additional data.
type backendRecordRow struct {
	bun.BaseModel `bun:"table:backend_records"`

	Backend    string    `bun:"backend,pk"`
	ID         string    `bun:"id,pk"`
	KeyID      string    `bun:"key_id,notnull"`
	Nonce      []byte    `bun:"nonce,notnull"`
	Ciphertext []byte    `bun:"ciphertext,notnull"`
	UpdatedAt  time.Time `bun:"updated_at,notnull"`
}

func recordAD(backend, id string) []byte { return []byte("backend record\x00" + backend + "\x00" + id) }

// PutBackendRecord stores value (a driver's JSON) as the record of instance
// id of a backend, replacing any previous one. It implements
// backends.Records for cmd/hoist.
func (s *Store) PutBackendRecord(ctx context.Context, backend, id string, value json.RawMessage) error {
	if backend == "" || id == "" {
		return fmt.Errorf("put backend record: %w", errEmptyName)
	}
	gcm, err := s.aead()
	if err != nil {
		return fmt.Errorf("put backend record %s/%s: %w", backend, id, err)
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("put backend record %s/%s: %w", backend, id, err)
	}
	row := backendRecordRow{Backend: backend, ID: id, KeyID: s.keyID, Nonce: nonce,
		Ciphertext: gcm.Seal(nil, nonce, value, recordAD(backend, id)), UpdatedAt: s.Now()}
	if _, err := s.db.NewInsert().Model(&row).On("CONFLICT (backend, id) DO UPDATE").
		Set("key_id = EXCLUDED.key_id").Set("nonce = EXCLUDED.nonce").
		Set("ciphertext = EXCLUDED.ciphertext").Set("updated_at = EXCLUDED.updated_at").
		Exec(ctx); err != nil {
		return fmt.Errorf("put backend record %s/%s: %w", backend, id, err)
	}
	return nil
}

// GetBackendRecord returns the record of instance id of a backend; ok is
// false when there is none.
func (s *Store) GetBackendRecord(ctx context.Context, backend, id string) (value json.RawMessage, ok bool, err error) {
	var row backendRecordRow
	if err := s.db.NewSelect().Model(&row).Where("backend = ? AND id = ?", backend, id).Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("get backend record %s/%s: %w", backend, id, err)
	}
	v, err := s.openRecord(row)
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// ListBackendRecords returns every record of a backend by instance id.
func (s *Store) ListBackendRecords(ctx context.Context, backend string) (map[string]json.RawMessage, error) {
	var rows []backendRecordRow
	if err := s.db.NewSelect().Model(&rows).Where("backend = ?", backend).OrderExpr("id").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list backend records %s: %w", backend, err)
	}
	out := make(map[string]json.RawMessage, len(rows))
	for _, r := range rows {
		v, err := s.openRecord(r)
		if err != nil {
			return nil, err
		}
		out[r.ID] = v
	}
	return out, nil
}

// DeleteBackendRecord removes the record of instance id of a backend (no
// error when absent).
func (s *Store) DeleteBackendRecord(ctx context.Context, backend, id string) error {
	if _, err := s.db.NewDelete().Model((*backendRecordRow)(nil)).
		Where("backend = ? AND id = ?", backend, id).Exec(ctx); err != nil {
		return fmt.Errorf("delete backend record %s/%s: %w", backend, id, err)
	}
	return nil
}

func (s *Store) openRecord(row backendRecordRow) (json.RawMessage, error) {
	gcm, err := s.aead()
	if err != nil {
		return nil, fmt.Errorf("backend record %s/%s: %w", row.Backend, row.ID, err)
	}
	if row.KeyID != s.keyID {
		return nil, fmt.Errorf("backend record %s/%s: stored with key %s, configured key is %s: %w", row.Backend, row.ID, row.KeyID, s.keyID, ErrSecretKey)
	}
	plain, err := gcm.Open(nil, row.Nonce, row.Ciphertext, recordAD(row.Backend, row.ID))
	if err != nil {
		return nil, fmt.Errorf("backend record %s/%s: authentication failed: %w", row.Backend, row.ID, ErrSecretKey)
	}
	return plain, nil
}
