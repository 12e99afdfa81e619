package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/store"
	"hoist/web"
	"hoist/web/client"
	"hoist/web/internal/fixture"
	"hoist/web/storeview"
)

// sshController is the web's Controller with JobSSH: each DialJobSSH
// returns one end of a pipe whose other end a real x/crypto/ssh server
// serves, accepting only the user key the route passed on. Its sessions
// answer an exec request with "ran <command> in <job>" and exit status 3.
type sshController struct {
	hostKey ssh.Signer
	mu      sync.Mutex
	dialed  []string // job ids
	keys    []string // user keys as received
	wg      sync.WaitGroup
}

func (f *sshController) StopRun(context.Context, string, bool) error { return errors.ErrUnsupported }
func (f *sshController) RerunRun(context.Context, string) error      { return errors.ErrUnsupported }
func (f *sshController) SetRunSuspended(context.Context, string, bool) error {
	return errors.ErrUnsupported
}
func (f *sshController) SetAutoSync(context.Context, bool) error     { return errors.ErrUnsupported }
func (f *sshController) ApplyRevision(context.Context, string) error { return errors.ErrUnsupported }

func (f *sshController) DialJobSSH(_ context.Context, jobID, userKey string) (net.Conn, string, error) {
	f.mu.Lock()
	f.dialed = append(f.dialed, jobID)
	f.keys = append(f.keys, userKey)
	f.mu.Unlock()
	allowed, _, _, _, err := ssh.ParseAuthorizedKey([]byte(userKey))
	if err != nil {
		return nil, "", err
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if bytes.Equal(k.Marshal(), allowed.Marshal()) {
			return nil, nil
		}
		return nil, errors.New("unknown key")
	}}
	cfg.AddHostKey(f.hostKey)
	ours, theirs := net.Pipe()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer theirs.Close()
		sc, chans, reqs, err := ssh.NewServerConn(theirs, cfg)
		if err != nil {
			return
		}
		defer sc.Close()
		go ssh.DiscardRequests(reqs)
		for nc := range chans {
			if nc.ChannelType() != "session" {
				_ = nc.Reject(ssh.UnknownChannelType, "sessions only")
				continue
			}
			ch, creqs, err := nc.Accept()
			if err != nil {
				return
			}
			for r := range creqs {
				if r.Type != "exec" {
					_ = r.Reply(false, nil)
					continue
				}
				_ = r.Reply(true, nil)
				cmd := string(r.Payload[4:])
				_, _ = ch.Write([]byte("ran " + cmd + " in " + jobID + "\n"))
				status := make([]byte, 4)
				binary.BigEndian.PutUint32(status, 3)
				_, _ = ch.SendRequest("exit-status", false, status)
				_ = ch.Close()
				break
			}
		}
	}()
	return ours, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(f.hostKey.PublicKey()))), nil
}

// sshServer is a real web server over the fixture's store whose controller
// has JobSSH (nil: the server has none).
func sshServer(t *testing.T, ctrl web.Controller) (string, fixture.Seeded, *store.Store) {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "hoist.db"), store.Options{SecretKey: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	seeded, err := fixture.Seed(t.Context(), st, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	view := storeview.New(st, "")
	srv, err := web.New(web.Config{AdminToken: "admin-tok"}, web.Deps{Store: view, Syncer: syncer{view}, Tokens: view, Controller: ctrl})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	return ts.URL, seeded, st
}

func newUserKey(t *testing.T) (ssh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
}

// TestDialSSH_reachesTheRunningJobThroughTheServer: the route upgrades the
// connection and splices it to the job's SSH server; an x/crypto/ssh client
// pinned to the host key the server returned runs a command there and gets
// its output and exit status; the user key reaches the job without its
// comment.
func TestDialSSH_reachesTheRunningJobThroughTheServer(t *testing.T) {
	_, hk, _ := ed25519.GenerateKey(rand.Reader)
	host, err := ssh.NewSignerFromKey(hk)
	if err != nil {
		t.Fatal(err)
	}
	ctrl := &sshController{hostKey: host}
	url, seeded, _ := sshServer(t, ctrl)
	signer, pub := newUserKey(t)
	c := &client.Client{BaseURL: url, Token: seeded.Tokens.User}
	conn, hostKey, err := c.DialSSH(t.Context(), "train", "", pub+" me@laptop")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pinned, _, _, _, err := ssh.ParseAuthorizedKey([]byte(hostKey))
	if err != nil {
		t.Fatalf("host key %q: %v", hostKey, err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(conn, "train", &ssh.ClientConfig{
		User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(pinned), HostKeyAlgorithms: []string{pinned.Type()},
	})
	if err != nil {
		t.Fatal(err)
	}
	sshc := ssh.NewClient(sc, chans, reqs)
	defer sshc.Close()
	sess, err := sshc.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.Output("cat /etc/hostname")
	var ee *ssh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 3 {
		t.Errorf("exit: %v, want status 3", err)
	}
	ctrl.mu.Lock()
	dialed, keys := ctrl.dialed, ctrl.keys
	ctrl.mu.Unlock()
	if len(dialed) != 1 || string(out) != "ran cat /etc/hostname in "+dialed[0]+"\n" {
		t.Errorf("output %q, dialed %v", out, dialed)
	}
	if len(keys) != 1 || keys[0] != pub {
		t.Errorf("user key reached the job as %q, want %q", keys, pub)
	}
	sshc.Close()
	ctrl.wg.Wait()
}

// TestDialSSH_refusesWhatItCannotConnect: typed errors for each refusal.
func TestDialSSH_refusesWhatItCannotConnect(t *testing.T) {
	_, hk, _ := ed25519.GenerateKey(rand.Reader)
	host, _ := ssh.NewSignerFromKey(hk)
	url, seeded, _ := sshServer(t, &sshController{hostKey: host})
	noSSH, seeded2, _ := sshServer(t, nil)
	_, pub := newUserKey(t)
	for name, tc := range map[string]struct {
		url, token, run, job, key string
		status                    int
	}{
		"viewer may not":            {url, seeded.Tokens.Viewer, "train", "", pub, http.StatusForbidden},
		"no user key":               {url, seeded.Tokens.User, "train", "", "", http.StatusBadRequest},
		"a user key that is no key": {url, seeded.Tokens.User, "train", "", "ssh-ed25519 AAAAnope", http.StatusBadRequest},
		"unknown run":               {url, seeded.Tokens.User, "nope", "", pub, http.StatusNotFound},
		"finished run":              {url, seeded.Tokens.User, "hello", "", pub, http.StatusNotFound},
		"unknown job":               {url, seeded.Tokens.User, "train", "7", pub, http.StatusNotFound},
		"server without SSH":        {noSSH, seeded2.Tokens.User, "train", "", pub, http.StatusNotImplemented},
	} {
		t.Run(name, func(t *testing.T) {
			c := &client.Client{BaseURL: tc.url, Token: tc.token}
			conn, _, err := c.DialSSH(t.Context(), tc.run, tc.job, tc.key)
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Status != tc.status {
				if conn != nil {
					conn.Close()
				}
				t.Fatalf("DialSSH = %v, want status %d", err, tc.status)
			}
			if tc.status == http.StatusNotFound && !errors.Is(err, client.ErrNotFound) {
				t.Errorf("%v is not ErrNotFound", err)
			}
		})
	}
}
