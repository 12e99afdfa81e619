package source

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
)

// Credentials authenticate to a remote repository. Its String and LogValue
// methods never print a secret.
type Credentials struct {
	// Username and Password are HTTP basic auth; a token goes in Password
	// (Username then defaults to "git": most hosts accept any name).
	Username, Password string
	// SSHKeyFile is a PEM private key for ssh:// and scp-like URLs. Empty
	// means the SSH agent.
	SSHKeyFile string
	// SSHKey is a PEM private key given by value (a project secret); it
	// wins over SSHKeyFile.
	SSHKey string
	// SSHKeyPassphrase decrypts SSHKeyFile or SSHKey.
	SSHKeyPassphrase string
	// KnownHostsFile pins the server's host keys. Empty means
	// $SSH_KNOWN_HOSTS, ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts.
	// Host keys are always checked.
	KnownHostsFile string
	// KnownHosts is known_hosts content given by value (a project
	// secret); it wins over KnownHostsFile.
	KnownHosts string
	// CAFile is a PEM bundle of extra certificate authorities trusted for
	// https:// remotes (a self-hosted server with an internal CA), in
	// addition to the system's.
	CAFile string
}

// Environment variables read by CredentialsFromEnv.
const (
	EnvGitUsername         = "HOIST_GIT_USERNAME"
	EnvGitPassword         = "HOIST_GIT_PASSWORD"
	EnvGitToken            = "HOIST_GIT_TOKEN" // alias of HOIST_GIT_PASSWORD
	EnvGitSSHKey           = "HOIST_GIT_SSH_KEY"
	EnvGitSSHKeyPassphrase = "HOIST_GIT_SSH_KEY_PASSPHRASE"
	EnvGitKnownHosts       = "HOIST_GIT_KNOWN_HOSTS"
	EnvGitCAFile           = "HOIST_GIT_CA_FILE"
)

// CredentialsFromEnv reads Credentials from the HOIST_GIT_* variables
// through getenv (os.Getenv in production).
func CredentialsFromEnv(getenv func(string) string) Credentials {
	c := Credentials{
		Username:         getenv(EnvGitUsername),
		Password:         getenv(EnvGitPassword),
		SSHKeyFile:       getenv(EnvGitSSHKey),
		SSHKeyPassphrase: getenv(EnvGitSSHKeyPassphrase),
		KnownHostsFile:   getenv(EnvGitKnownHosts),
		CAFile:           getenv(EnvGitCAFile),
	}
	if c.Password == "" {
		c.Password = getenv(EnvGitToken)
	}
	return c
}

// IsZero reports whether no credential is set.
func (c Credentials) IsZero() bool { return c == Credentials{} }

// String describes which credentials are set, without their values.
func (c Credentials) String() string {
	var parts []string
	if c.Username != "" || c.Password != "" {
		parts = append(parts, "basic_auth(user="+c.Username+", password="+redacted(c.Password)+")")
	}
	if c.SSHKeyFile != "" {
		parts = append(parts, "ssh_key("+c.SSHKeyFile+", passphrase="+redacted(c.SSHKeyPassphrase)+")")
	}
	if c.SSHKey != "" {
		parts = append(parts, "ssh_key(inline, passphrase="+redacted(c.SSHKeyPassphrase)+")")
	}
	if c.KnownHosts != "" {
		parts = append(parts, "known_hosts(inline)")
	}
	if c.KnownHostsFile != "" {
		parts = append(parts, "known_hosts("+c.KnownHostsFile+")")
	}
	if c.CAFile != "" {
		parts = append(parts, "ca("+c.CAFile+")")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// GoString keeps %#v from printing secrets.
func (c Credentials) GoString() string { return "source.Credentials{" + c.String() + "}" }

// LogValue implements slog.LogValuer without secrets.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

func redacted(s string) string {
	if s == "" {
		return "unset"
	}
	return "set"
}

// remoteURL is a parsed remote: the URL without secrets (safe to log and
// to hand to go-git) and the auth method built from URL user-info,
// explicit credentials or the environment.
type remoteURL struct {
	clean    string
	ep       *transport.Endpoint
	auth     transport.AuthMethod
	caBundle []byte // extra trusted CAs for https
}

// parseRemote validates raw and builds its auth method. Credentials in the
// URL's user-info win over creds, which win over getenv.
func parseRemote(raw string, creds Credentials, getenv func(string) string) (*remoteURL, error) {
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, redactURL(raw))
	}
	r := &remoteURL{ep: ep, clean: raw}
	if creds.IsZero() {
		creds = CredentialsFromEnv(getenv)
	}
	switch ep.Protocol {
	case "file":
		if ep.Path == "" {
			return nil, fmt.Errorf("%w: %s: no path", ErrBadURL, raw)
		}
	case "git":
	case "http", "https":
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("%w: %s", ErrBadURL, redactURL(raw))
		}
		user, pass := creds.Username, creds.Password
		if u.User != nil {
			user = u.User.Username()
			pass, _ = u.User.Password()
			u.User = nil
		}
		r.clean = u.String()
		if user != "" || pass != "" {
			if user == "" {
				user = "git"
			}
			r.auth = &githttp.BasicAuth{Username: user, Password: pass}
		}
		if creds.CAFile != "" {
			b, err := os.ReadFile(creds.CAFile)
			if err != nil {
				return nil, fmt.Errorf("read ca file: %w", err)
			}
			if !x509.NewCertPool().AppendCertsFromPEM(b) {
				return nil, fmt.Errorf("ca file %s: no PEM certificates", creds.CAFile)
			}
			r.caBundle = b
		}
	case "ssh":
		if u, err := url.Parse(raw); err == nil && u.Scheme == "ssh" {
			if _, hasPass := u.User.Password(); hasPass {
				u.User = url.User(u.User.Username()) // never a password on ssh
			}
			r.clean = u.String()
		}
		user := ep.User
		if user == "" {
			user = "git"
		}
		auth, err := sshAuth(user, net.JoinHostPort(ep.Host, strconv.Itoa(defaultPort(ep.Port))), creds)
		if err != nil {
			return nil, err
		}
		r.auth = auth
	default:
		return nil, fmt.Errorf("%w: unsupported scheme %q", ErrBadURL, ep.Protocol)
	}
	return r, nil
}

func defaultPort(p int) int {
	if p == 0 {
		return 22
	}
	return p
}

// sshAuth builds an SSH auth method that checks host keys. With our own
// HostKeyCallback, go-git does not pick the host key algorithms itself, so
// they are set from the known_hosts entries of the host: otherwise a host
// known only by its ed25519 key fails when it offers ECDSA first.
func sshAuth(user, hostPort string, creds Credentials) (transport.AuthMethod, error) {
	if creds.SSHKeyFile == "" && creds.KnownHostsFile == "" && creds.SSHKey == "" && creds.KnownHosts == "" {
		return nil, nil // go-git's default: the agent, default known_hosts, algorithms set
	}
	var helper *gitssh.HostKeyCallbackHelper
	var auth transport.AuthMethod
	if creds.SSHKey != "" {
		pk, err := gitssh.NewPublicKeys(user, []byte(creds.SSHKey), creds.SSHKeyPassphrase)
		if err != nil {
			return nil, fmt.Errorf("read the ssh key: %w", err)
		}
		helper, auth = &pk.HostKeyCallbackHelper, pk
	} else if creds.SSHKeyFile != "" {
		pk, err := gitssh.NewPublicKeysFromFile(user, creds.SSHKeyFile, creds.SSHKeyPassphrase)
		if err != nil {
			return nil, fmt.Errorf("read ssh key %s: %w", creds.SSHKeyFile, err)
		}
		helper, auth = &pk.HostKeyCallbackHelper, pk
	} else {
		ag, err := gitssh.NewSSHAgentAuth(user)
		if err != nil {
			return nil, fmt.Errorf("ssh agent: %w", err)
		}
		helper, auth = &ag.HostKeyCallbackHelper, ag
	}
	if creds.KnownHosts != "" {
		// go-git reads known_hosts from files only; the file lives as long
		// as reading it takes.
		f, err := os.CreateTemp("", "hoist-known-hosts-*")
		if err != nil {
			return nil, err
		}
		defer os.Remove(f.Name())
		_, err = f.WriteString(creds.KnownHosts)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		db, err := gitssh.NewKnownHostsDb(f.Name())
		if err != nil {
			return nil, fmt.Errorf("read known hosts: %w", err)
		}
		helper.HostKeyCallback = db.HostKeyCallback()
		helper.HostKeyAlgorithms = db.HostKeyAlgorithms(hostPort)
		if len(helper.HostKeyAlgorithms) == 0 {
			return nil, fmt.Errorf("the known hosts have no key for %s", hostPort)
		}
	} else if creds.KnownHostsFile != "" {
		db, err := gitssh.NewKnownHostsDb(creds.KnownHostsFile)
		if err != nil {
			return nil, fmt.Errorf("read known hosts %s: %w", creds.KnownHostsFile, err)
		}
		helper.HostKeyCallback = db.HostKeyCallback()
		helper.HostKeyAlgorithms = db.HostKeyAlgorithms(hostPort)
		if len(helper.HostKeyAlgorithms) == 0 {
			return nil, fmt.Errorf("known hosts %s has no key for %s", creds.KnownHostsFile, hostPort)
		}
	}
	return auth, nil
}

// redactURL removes the password from a URL for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if i := strings.LastIndex(raw, "@"); i >= 0 && strings.Contains(raw[:i], "://") {
			scheme, _, _ := strings.Cut(raw, "://")
			return scheme + "://***@" + raw[i+1:]
		}
		return raw
	}
	return u.Redacted()
}
