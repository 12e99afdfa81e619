package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// SecretKeyEnv is the environment variable that may hold the secret key
// (base64 or hex of 32 bytes); it takes precedence over the key file.
const SecretKeyEnv = "HOIST_SECRET_KEY"

// SecretKeyFile is the key file's name inside the data directory.
const SecretKeyFile = "secret.key"

// secretRow is a secret at rest: AES-256-GCM ciphertext of the value with the
// project and name as additional data, so a ciphertext cannot be moved to
// another name.
type secretRow struct {
	bun.BaseModel `bun:"table:secrets"`

	Project    string    `bun:"project,pk"`
	Name       string    `bun:"name,pk"`
	KeyID      string    `bun:"key_id,notnull"`
	Nonce      []byte    `bun:"nonce,notnull"`
	Ciphertext []byte    `bun:"ciphertext,notnull"`
	CreatedAt  time.Time `bun:"created_at,notnull"`
	UpdatedAt  time.Time `bun:"updated_at,notnull"`
}

// LoadSecretKey returns the secret key from $HOIST_SECRET_KEY when set,
// otherwise from <dataDir>/secret.key, creating that file (mode 0600) with a
// fresh random key when it does not exist.
func LoadSecretKey(dataDir string) ([]byte, error) {
	if v := strings.TrimSpace(os.Getenv(SecretKeyEnv)); v != "" {
		key, err := ParseSecretKey(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", SecretKeyEnv, err)
		}
		return key, nil
	}
	path := filepath.Join(dataDir, SecretKeyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("generate secret key: %w", err)
		}
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("create data dir: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create secret key file: %w", err)
		}
		_, werr := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("write secret key file: %w", werr)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read secret key file: %w", err)
	}
	key, err := ParseSecretKey(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("secret key file %s: %w", path, err)
	}
	return key, nil
}

// ParseSecretKey decodes a 32-byte key written as base64 or hex.
func ParseSecretKey(s string) ([]byte, error) {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	return nil, errors.New("secret key must be 32 bytes, base64 or hex encoded")
}

func (s *Store) setKey(key []byte) error {
	if len(key) != 32 {
		return fmt.Errorf("secret key must be 32 bytes (AES-256), got %d", len(key))
	}
	s.key = append([]byte(nil), key...)
	sum := sha256.Sum256(append([]byte("hoist secret key id\x00"), key...))
	s.keyID = hex.EncodeToString(sum[:8])
	return nil
}

func (s *Store) aead() (cipher.AEAD, error) {
	if s.key == nil {
		return nil, fmt.Errorf("%w: no secret key configured", ErrSecretKey)
	}
	block, err := aes.NewCipher(s.key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func secretAD(proj, name string) []byte { return []byte(proj + "\x00" + name) }

// SetSecret stores value under project/name, encrypted with AES-256-GCM.
// The value is never logged.
func (s *Store) SetSecret(ctx context.Context, proj, name string, value []byte) error {
	if name == "" {
		return fmt.Errorf("set secret: %w", errEmptyName)
	}
	proj = project(proj)
	gcm, err := s.aead()
	if err != nil {
		return fmt.Errorf("set secret %s: %w", name, err)
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("set secret %s: %w", name, err)
	}
	now := s.Now()
	row := secretRow{
		Project: proj, Name: name, KeyID: s.keyID, Nonce: nonce,
		Ciphertext: gcm.Seal(nil, nonce, value, secretAD(proj, name)),
		CreatedAt:  now, UpdatedAt: now,
	}
	_, err = s.db.NewInsert().Model(&row).
		On("CONFLICT (project, name) DO UPDATE").
		Set("key_id = EXCLUDED.key_id").
		Set("nonce = EXCLUDED.nonce").
		Set("ciphertext = EXCLUDED.ciphertext").
		Set("updated_at = EXCLUDED.updated_at").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("set secret %s: %w", name, err)
	}
	return nil
}

// GetSecret decrypts and returns the secret, ErrNotFound when absent, or
// ErrSecretKey when the configured key is not the one it was stored with.
func (s *Store) GetSecret(ctx context.Context, proj, name string) ([]byte, error) {
	proj = project(proj)
	var row secretRow
	if err := s.db.NewSelect().Model(&row).Where("project = ? AND name = ?", proj, name).Scan(ctx); err != nil {
		return nil, notFound(err, "get secret "+name)
	}
	gcm, err := s.aead()
	if err != nil {
		return nil, fmt.Errorf("get secret %s: %w", name, err)
	}
	if row.KeyID != s.keyID {
		return nil, fmt.Errorf("get secret %s: stored with key %s, configured key is %s: %w", name, row.KeyID, s.keyID, ErrSecretKey)
	}
	plain, err := gcm.Open(nil, row.Nonce, row.Ciphertext, secretAD(proj, name))
	if err != nil {
		return nil, fmt.Errorf("get secret %s: authentication failed: %w", name, ErrSecretKey)
	}
	return plain, nil
}

// ListSecretNames returns the names of a project's secrets, sorted.
func (s *Store) ListSecretNames(ctx context.Context, proj string) ([]string, error) {
	var names []string
	err := s.db.NewSelect().Model((*secretRow)(nil)).Column("name").
		Where("project = ?", project(proj)).OrderExpr("name").Scan(ctx, &names)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return names, nil
}

// DeleteSecret removes a secret (no error when absent).
func (s *Store) DeleteSecret(ctx context.Context, proj, name string) error {
	_, err := s.db.NewDelete().Model((*secretRow)(nil)).Where("project = ? AND name = ?", project(proj), name).Exec(ctx)
	if err != nil {
		return fmt.Errorf("delete secret %s: %w", name, err)
	}
	return nil
}

// SecretInfo is what may be shown about a secret: its name and when it was
// created and last set, never its value.
type SecretInfo struct {
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ListSecrets returns a project's secrets without their values, sorted by
// name.
func (s *Store) ListSecrets(ctx context.Context, proj string) ([]SecretInfo, error) {
	var rows []secretRow
	err := s.db.NewSelect().Model(&rows).Column("name", "created_at", "updated_at").
		Where("project = ?", project(proj)).OrderExpr("name").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	out := make([]SecretInfo, len(rows))
	for i, r := range rows {
		out[i] = SecretInfo{Name: r.Name, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	}
	return out, nil
}

// gatewayTokenAD binds a sealed gateway token to its gateway.
func gatewayTokenAD(id string) []byte { return []byte("gateway admin token\x00" + id) }

// SealGatewayToken sets g.AdminToken to token sealed with the secret key
// (AES-256-GCM, bound to g.ID), as "<key id>:<base64 nonce and ciphertext>".
func (s *Store) SealGatewayToken(g *Gateway, token string) error {
	gcm, err := s.aead()
	if err != nil {
		return fmt.Errorf("seal gateway token: %w", err)
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("seal gateway token: %w", err)
	}
	sealed := gcm.Seal(nonce, nonce, []byte(token), gatewayTokenAD(g.ID))
	g.AdminToken = s.keyID + ":" + base64.StdEncoding.EncodeToString(sealed)
	return nil
}

// GatewayToken opens g.AdminToken; ErrSecretKey when the configured key is
// not the one it was sealed with.
func (s *Store) GatewayToken(g Gateway) (string, error) {
	kid, b64, ok := strings.Cut(g.AdminToken, ":")
	if !ok {
		return "", fmt.Errorf("gateway %s: no admin token", g.Name)
	}
	gcm, err := s.aead()
	if err != nil {
		return "", fmt.Errorf("open gateway token: %w", err)
	}
	if kid != s.keyID {
		return "", fmt.Errorf("open gateway token: sealed with key %s, configured key is %s: %w", kid, s.keyID, ErrSecretKey)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) < gcm.NonceSize() {
		return "", fmt.Errorf("open gateway token: malformed: %w", ErrSecretKey)
	}
	plain, err := gcm.Open(nil, raw[:gcm.NonceSize()], raw[gcm.NonceSize():], gatewayTokenAD(g.ID))
	if err != nil {
		return "", fmt.Errorf("open gateway token: authentication failed: %w", ErrSecretKey)
	}
	return string(plain), nil
}
