package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"

	"hoist/web/client"
)

// sshDir is where `hoist attach` and `hoist ssh` keep the user's key and
// the jobs' host keys: ssh/ next to the config file `hoist login` writes
// (~/.config/hoist/ssh).
func sshDir() (string, error) {
	p, err := client.DefaultConfigPath()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(p), "ssh"), nil
}

// userKey is the user's SSH key that jobs accept for connections through
// the server: path is its private key file.
type userKey struct {
	path   string
	signer ssh.Signer
}

// authorizedKey is the public key in authorized_keys form.
func (k userKey) authorizedKey() string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k.signer.PublicKey())))
}

// loadUserKey reads the private key at identity, or, when identity is
// empty, the default key id_ed25519 in sshDir, generating that one (an
// ed25519 key, mode 0600, its directory 0700) on first use. A key with a
// passphrase is refused: hoist cannot ask for it.
func loadUserKey(identity string) (userKey, error) {
	if identity == "" {
		dir, err := sshDir()
		if err != nil {
			return userKey{}, err
		}
		identity = filepath.Join(dir, "id_ed25519")
		if _, err := os.Stat(identity); errors.Is(err, os.ErrNotExist) {
			if err := generateUserKey(identity); err != nil {
				return userKey{}, err
			}
		}
	}
	abs, err := filepath.Abs(identity)
	if err != nil {
		return userKey{}, err
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return userKey{}, fmt.Errorf("read the SSH key: %w", err)
	}
	s, err := ssh.ParsePrivateKey(b)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return userKey{}, fmt.Errorf("the SSH key %s has a passphrase; give a key without one (--identity)", abs)
	}
	if err != nil {
		return userKey{}, fmt.Errorf("read the SSH key %s: %w", abs, err)
	}
	return userKey{path: abs, signer: s}, nil
}

// generateUserKey writes a new ed25519 key to path (OpenSSH's format, so
// that ssh and IDEs can use it too) and its public half to path.pub.
func generateUserKey(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create the SSH key: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	block, err := ssh.MarshalPrivateKey(priv, "hoist")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return fmt.Errorf("create the SSH key: %w", err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return err
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " hoist\n"
	if err := writeFileAtomic(path+".pub", []byte(line), 0o644); err != nil {
		return fmt.Errorf("create the SSH key: %w", err)
	}
	return nil
}

// writeFileAtomic replaces path with b (mode perm) through a temporary
// file in the same directory.
func writeFileAtomic(path string, b []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
