package podcloud

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// newKeyPair returns a fresh ed25519 key pair: the private key as OpenSSH
// PEM and the public key in authorized_keys form (no newline).
func newKeyPair(comment string) (private, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return "", "", fmt.Errorf("marshal key: %w", err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", "", fmt.Errorf("public key: %w", err)
	}
	return string(pem.EncodeToMemory(block)), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " " + comment, nil
}
