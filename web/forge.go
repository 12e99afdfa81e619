package web

import (
	"context"
	"fmt"
	"net/http"
)

// previewState is the commit status a pull request's preview posts, in
// GitHub's words (GitLab says failed for failure and error).
type previewState string

const (
	statePending previewState = "pending"
	stateSuccess previewState = "success"
	stateFailure previewState = "failure"
	stateError   previewState = "error"
)

// statusContext names hoist's commit status on both forges.
const statusContext = "hoist/plan"

// forge posts a pull request's preview back to where it lives: a commit
// status on its head and one comment (a note on GitLab) that each new push
// edits. githubForge and gitlabForge speak the forges' REST APIs through
// their official clients.
type forge interface {
	// setStatus posts the commit status of pr's head.
	setStatus(ctx context.Context, pr PRPlan, state previewState, desc, targetURL string) error
	// upsertComment writes body as hoist's comment on pr: it edits comment
	// id when it still exists, else the comment carrying previewMarker,
	// else creates one, and returns the id of the comment written.
	upsertComment(ctx context.Context, pr PRPlan, id int64, body string) (int64, error)
}

// newForges builds the forge clients cfg has tokens for.
func newForges(cfg Config) (map[string]forge, error) {
	out := map[string]forge{}
	if cfg.GitHubToken != "" {
		f, err := newGitHubForge(cfg.GitHubAPI, cfg.GitHubToken, cfg.HTTPClient)
		if err != nil {
			return nil, fmt.Errorf("github api %q: %w", cfg.GitHubAPI, err)
		}
		out["github"] = f
	}
	if cfg.GitLabToken != "" {
		f, err := newGitLabForge(cfg.GitLabAPI, cfg.GitLabToken, cfg.HTTPClient)
		if err != nil {
			return nil, fmt.Errorf("gitlab api %q: %w", cfg.GitLabAPI, err)
		}
		out["gitlab"] = f
	}
	return out, nil
}

// notFound reports an HTTP 404 answer: a stored comment id whose comment
// was deleted.
func notFound(resp *http.Response) bool {
	return resp != nil && resp.StatusCode == http.StatusNotFound
}
