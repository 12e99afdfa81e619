package reconciler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/schema"
	"hoist/store"
)

// secretRefRE matches `${{ secrets.NAME }}`, the one interpolation dstack
// does on the server (dstack: server/services/jobs/__init__.py,
// interpolate_job_spec_secrets); the names are what schema.SecretRefs finds.
var secretRefRE = regexp.MustCompile(`\$\{\{\s*secrets\.([A-Za-z0-9_-]+)\s*\}\}`)

// missingSecretError is a secret a spec needs that the project does not
// have; path is the field that references it.
type missingSecretError struct {
	name, path string
}

func (e *missingSecretError) Error() string {
	return fmt.Sprintf("secret %s is not set (referenced by %s)", e.name, e.path)
}

// secretResolver looks secrets up once each and remembers every value it
// handed out, for masking.
type secretResolver struct {
	ctx    context.Context
	st     *store.Store
	proj   string
	values map[string][]byte
}

func (c *Controller) secrets(ctx context.Context) *secretResolver {
	return &secretResolver{ctx: ctx, st: c.st, proj: c.cfg.Project, values: map[string][]byte{}}
}

// get returns the named secret; a *missingSecretError naming path when the
// project has none.
func (r *secretResolver) get(name, path string) ([]byte, error) {
	if v, ok := r.values[name]; ok {
		return v, nil
	}
	v, err := r.st.GetSecret(r.ctx, r.proj, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &missingSecretError{name: name, path: path}
	}
	if err != nil {
		return nil, err
	}
	r.values[name] = v
	return v, nil
}

// interpolate replaces every `${{ secrets.NAME }}` in s.
func (r *secretResolver) interpolate(s, path string) (string, error) {
	var err error
	out := secretRefRE.ReplaceAllStringFunc(s, func(m string) string {
		if err != nil {
			return m
		}
		name := secretRefRE.FindStringSubmatch(m)[1]
		v, gerr := r.get(name, path)
		if gerr != nil {
			err = gerr
			return m
		}
		return string(v)
	})
	return out, err
}

// jobSecrets is what a job's spec gets from the project's secrets.
type jobSecrets struct {
	// env is the spec's env with references resolved and bare names
	// (`env: [HF_TOKEN]`) taken from the secret of that name.
	env map[string]string
	// registryAuth is the spec's registry_auth, resolved (nil without one).
	registryAuth *api.RegistryAuth
}

// resolveJobSecrets interpolates secrets into the spec's env and
// registry_auth. A bare env name is dstack's pass-through from the applying
// user's environment; with no user at apply time in a GitOps flow, hoist
// takes it from the project's secret of the same name.
func (c *Controller) resolveJobSecrets(ctx context.Context, spec runSpec) (jobSecrets, error) {
	r := c.secrets(ctx)
	out := jobSecrets{env: map[string]string{}}
	for i, e := range spec.Env {
		path := "env[" + strconv.Itoa(i) + "]"
		if e.FromLocal {
			v, err := r.get(e.Name, path)
			if err != nil {
				return out, err
			}
			out.env[e.Name] = string(v)
			continue
		}
		v, err := r.interpolate(e.Value, path)
		if err != nil {
			return out, err
		}
		out.env[e.Name] = v
	}
	if ra := spec.RegistryAuth; ra != nil {
		user, err := r.interpolate(ra.Username, "registry_auth.username")
		if err != nil {
			return out, err
		}
		pass, err := r.interpolate(ra.Password, "registry_auth.password")
		if err != nil {
			return out, err
		}
		out.registryAuth = &api.RegistryAuth{Username: user, Password: pass}
	}
	return out, nil
}

// failForSecrets ends a job whose spec needs a secret the project lacks,
// before it starts, with a message naming the secret and where the spec
// references it. Other errors are returned for a retry.
func (c *Controller) failForSecrets(ctx context.Context, l store.Lease, job *store.Job, run *store.Run, err error) error {
	var miss *missingSecretError
	if errors.Is(err, store.ErrSecretKey) {
		// Another server (or this one after its key changed) stored the
		// secret: say so on the job and retry, as a server with the right
		// key may take it.
		msg := "waiting: " + err.Error() + "; every server needs the same secret key (HOIST_SECRET_KEY or <data-dir>/secret.key)"
		if job.StatusMessage != msg {
			job.StatusMessage = msg
			if uerr := c.st.UpdateJobLeased(ctx, l, job); uerr != nil {
				return uerr
			}
		}
		return err
	}
	if !errors.As(err, &miss) {
		return err
	}
	where := c.specPos(ctx, run.ResourceKind, run.ResourceName, run.Revision, miss.path)
	msg := fmt.Sprintf("secret %s is not set (%s); set it with `hoist secret set %s`", miss.name, where, miss.name)
	return c.setTerminating(ctx, l, job, reasonCreatingContainer, msg)
}

// specPos says where field path of a resource is written: file:line:col
// and the path when the revision's file can be read, else the file and the
// path, else the path.
func (c *Controller) specPos(ctx context.Context, kind, name, revision, path string) string {
	res, err := c.st.GetResource(ctx, c.cfg.Project, kind, name)
	if err != nil || res.File == "" {
		return path
	}
	where := res.File + " " + path
	if revision == "" {
		revision = res.Revision
	}
	snap, err := c.src.CheckoutAt(ctx, revision)
	if err != nil {
		return where
	}
	defer snap.Close()
	d, err := schema.LoadFiles(snap.FS, []string{res.File})
	if err != nil {
		return where
	}
	r, ok := d.Lookup(schema.Kind(kind), name)
	if !ok {
		return where
	}
	return r.PosOf(path).String() + " " + path
}

// resolveHostKey turns an identity_file written as `${{ secrets.NAME }}`
// (the host's, the fleet's default or the jump host's) into the private key
// it names, so SSH fleet keys need not be files on the server.
func (c *Controller) resolveHostKey(ctx context.Context, h *backends.SSHHost) error {
	r := c.secrets(ctx)
	for _, host := range []*backends.SSHHost{h, h.ProxyJump} {
		if host == nil || !secretRefRE.MatchString(host.IdentityFile) {
			continue
		}
		key, err := r.interpolate(host.IdentityFile, "identity_file")
		if err != nil {
			return err
		}
		host.PrivateKey, host.IdentityFile = []byte(key), ""
	}
	return nil
}

// logMasker replaces secret values in job output before it is stored.
type logMasker struct{ values [][]byte }

// maskFor returns the masker of a job: the values of every secret its spec
// uses (a secret it cannot resolve is not in its container either).
func (c *Controller) maskFor(ctx context.Context, job *store.Job) logMasker {
	spec, err := decodeRunSpec(job.Spec)
	if err != nil {
		return logMasker{}
	}
	r := c.secrets(ctx)
	for _, e := range spec.Env {
		if e.FromLocal {
			_, _ = r.get(e.Name, "")
			continue
		}
		for _, m := range secretRefRE.FindAllStringSubmatch(e.Value, -1) {
			_, _ = r.get(m[1], "")
		}
	}
	if ra := spec.RegistryAuth; ra != nil {
		for _, m := range secretRefRE.FindAllStringSubmatch(ra.Username+" "+ra.Password, -1) {
			_, _ = r.get(m[1], "")
		}
	}
	for _, repo := range spec.Repos {
		// The token or key (not the user name or host keys, which are no
		// secrets and would mask ordinary words).
		if names, _, err := gitSecrets(repo.URL); repo.URL != "" && err == nil {
			for _, n := range names {
				_, _ = r.get(n, "")
			}
		}
	}
	var m logMasker
	for _, v := range r.values {
		m.add(v)
	}
	return m
}

// minMaskedLine is the shortest line of a multi-line secret (a PEM key)
// masked on its own; shorter lines ("-----") would mask ordinary output.
const minMaskedLine = 8

func (m *logMasker) add(v []byte) {
	if len(bytes.TrimSpace(v)) == 0 {
		return
	}
	m.values = append(m.values, v, bytes.TrimSpace(v))
	for _, line := range bytes.Split(v, []byte("\n")) {
		if line = bytes.TrimSpace(line); len(line) >= minMaskedLine {
			m.values = append(m.values, line)
		}
	}
}

// mask rewrites the lines in place.
func (m logMasker) mask(lines []store.LogLine) {
	if len(m.values) == 0 {
		return
	}
	for i := range lines {
		for _, v := range m.values {
			if bytes.Contains(lines[i].Data, v) {
				lines[i].Data = bytes.ReplaceAll(lines[i].Data, v, []byte("***"))
			}
		}
	}
}

// hostKeyMissing records on an SSH fleet instance that its key's secret is
// missing (or cannot be read) and returns a stalled error: the instance
// waits for someone to set the secret and is retried with back-off.
func (c *Controller) hostKeyMissing(ctx context.Context, l store.Lease, inst *store.Instance, err error) error {
	var miss *missingSecretError
	if !errors.As(err, &miss) {
		return err
	}
	path := "ssh_config.identity_file"
	where := path
	if f, ferr := c.st.GetFleet(ctx, inst.FleetID); ferr == nil {
		var spec schema.Fleet
		if json.Unmarshal(f.Spec, &spec) == nil && spec.SSHConfig != nil {
			var h backends.SSHHost
			_ = json.Unmarshal(inst.BackendData, &h)
			for i, sh := range spec.SSHConfig.Hosts {
				switch {
				case sh.Hostname != h.Hostname:
				case sh.IdentityFile != "":
					path = "ssh_config.hosts[" + strconv.Itoa(i) + "].identity_file"
				case sh.ProxyJump != nil:
					path = "ssh_config.hosts[" + strconv.Itoa(i) + "].proxy_jump.identity_file"
				}
			}
		}
		where = c.specPos(ctx, string(schema.KindFleet), f.Name, f.Revision, path)
	}
	msg := fmt.Sprintf("secret %s is not set (%s); set it with `hoist secret set %s`", miss.name, where, miss.name)
	if inst.StatusMessage != msg {
		inst.StatusMessage = msg
		if uerr := c.st.UpdateInstanceLeased(ctx, l, inst); uerr != nil {
			return uerr
		}
		c.event(ctx, "instance", inst.Name, inst.ID, "stalled", "", "instance needs attention: "+msg)
	}
	return backends.Stalled(errors.New(msg))
}
