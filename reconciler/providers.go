package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sync"

	"hoist/reconciler/source"
	"hoist/schema"
	"hoist/store"
)

// providerRepoMaxBytes bounds the files of a provider repository read
// into memory.
const providerRepoMaxBytes = 64 << 20

// resolveWorkflows completes a revision's workflows before they are
// planned: a provider of another repository is fetched (once per commit)
// and read; a program provider's jobs are its kept output when it ran on
// the same input. Spec errors are returned as schema.Errors; a failed
// fetch is an error of the sync, which is tried again.
func (c *Controller) resolveWorkflows(ctx context.Context, fsys fs.FS, desired *schema.Desired) (schema.Errors, error) {
	var errs schema.Errors
	// Workflows of one provider repository and ref share one fetch.
	type fetched struct {
		fsys   fs.FS
		commit string
		err    error
	}
	repos := map[[2]string]fetched{}
	for i := range desired.Resources {
		r := &desired.Resources[i]
		if r.Kind != schema.KindWorkflow {
			continue
		}
		if r.NeedsProvider() {
			wf := r.Spec.(*schema.Workflow)
			k := [2]string{wf.Provider.Repo, wf.Provider.Ref}
			f, ok := repos[k]
			if !ok {
				f.fsys, f.commit, f.err = c.providerRepo(ctx, wf.Provider.Repo, wf.Provider.Ref)
				repos[k] = f
			}
			remote, commit, err := f.fsys, f.commit, f.err
			if err != nil {
				var bad *badProviderRepo
				if errors.As(err, &bad) {
					errs = append(errs, &schema.Error{Pos: r.Pos, Path: "provider",
						Msg: fmt.Sprintf("provider: repository %s: %s", wf.Provider.Repo, bad.msg)})
					continue
				}
				return nil, fmt.Errorf("workflow %s: fetch provider repository %s: %w", r.Name, wf.Provider.Repo, err)
			}
			if e := schema.ResolveWorkflow(r, fsys, remote, commit); len(e) > 0 {
				errs = append(errs, e...)
				continue
			}
		}
		wf := r.Spec.(*schema.Workflow)
		if wf.Program == nil || len(wf.Jobs) > 0 {
			continue
		}
		out, err := c.st.GetWorkflowOutput(ctx, c.cfg.Project, wf.InputHash)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var jobs []schema.WorkflowJob
		if err := json.Unmarshal(out, &jobs); err != nil {
			return nil, fmt.Errorf("workflow %s: decode kept output: %w", r.Name, err)
		}
		*r = schema.WithJobs(*r, jobs)
	}
	return errs, nil
}

// badProviderRepo is a provider repository that cannot be fetched for a
// reason the spec must fix (its URL, its credentials).
type badProviderRepo struct{ msg string }

func (e *badProviderRepo) Error() string { return e.msg }

// commitRE matches a full commit ID.
var commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// providerRepos keeps provider repositories' files by URL and commit.
type providerRepos struct {
	mu sync.Mutex
	m  map[string]fs.FS
}

// maxProviderRepos bounds providerRepos; past it the map starts over.
const maxProviderRepos = 64

// providerRepo fetches a provider repository at ref (a full commit ID, a
// branch, else the remote's default branch) with the spec repository's
// Git machinery and the project's Git secrets, and returns its files and
// commit; the files of a commit are read once.
func (c *Controller) providerRepo(ctx context.Context, url, ref string) (fs.FS, string, error) {
	mref := source.MirrorRef{Branch: ref}
	if commitRE.MatchString(ref) {
		mref = source.MirrorRef{Hash: ref}
	}
	tree, err := c.fetchMirror(ctx, url, mref)
	if err != nil {
		if errors.Is(err, source.ErrBadURL) || isAuthError(err) {
			return nil, "", &badProviderRepo{msg: err.Error()}
		}
		return nil, "", err
	}
	defer tree.Close()
	key := url + "@" + tree.Commit
	c.provRepos.mu.Lock()
	fsys, ok := c.provRepos.m[key]
	c.provRepos.mu.Unlock()
	if ok {
		return fsys, tree.Commit, nil
	}
	fsys, err = tree.ReadFS(providerRepoMaxBytes)
	if errors.Is(err, source.ErrTreeTooLarge) {
		return nil, "", &badProviderRepo{msg: err.Error()}
	}
	if err != nil {
		return nil, "", err
	}
	c.provRepos.mu.Lock()
	if c.provRepos.m == nil || len(c.provRepos.m) >= maxProviderRepos {
		c.provRepos.m = map[string]fs.FS{}
	}
	c.provRepos.m[key] = fsys
	c.provRepos.mu.Unlock()
	return fsys, tree.Commit, nil
}
