package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v93/github"
)

// githubForge posts previews through GitHub's REST API: commit statuses
// (https://docs.github.com/rest/commits/statuses#create-a-commit-status)
// and issue comments, which are a pull request's conversation
// (https://docs.github.com/rest/issues/comments).
type githubForge struct {
	c *github.Client
}

func newGitHubForge(api, token string, hc *http.Client) (*githubForge, error) {
	base := strings.TrimRight(api, "/") + "/"
	c, err := github.NewClient(github.WithHTTPClient(hc), github.WithAuthToken(token), github.WithURLs(&base, &base))
	if err != nil {
		return nil, err
	}
	return &githubForge{c: c}, nil
}

func splitRepo(full string) (owner, repo string, err error) {
	owner, repo, ok := strings.Cut(full, "/")
	if !ok || owner == "" || repo == "" {
		return "", "", fmt.Errorf("repository %q is not owner/name", full)
	}
	return owner, repo, nil
}

func (g *githubForge) setStatus(ctx context.Context, pr PRPlan, state previewState, desc, targetURL string) error {
	owner, repo, err := splitRepo(pr.Repo)
	if err != nil {
		return err
	}
	st := github.RepoStatus{State: github.Ptr(string(state)), Description: github.Ptr(desc), Context: github.Ptr(statusContext)}
	if targetURL != "" {
		st.TargetURL = github.Ptr(targetURL)
	}
	if _, _, err := g.c.Repositories.CreateStatus(ctx, owner, repo, pr.HeadSHA, st); err != nil {
		return fmt.Errorf("github status: %w", err)
	}
	return nil
}

func (g *githubForge) upsertComment(ctx context.Context, pr PRPlan, id int64, body string) (int64, error) {
	owner, repo, err := splitRepo(pr.Repo)
	if err != nil {
		return 0, err
	}
	req := github.IssueCommentRequest{Body: body}
	if id == 0 {
		id, err = g.findComment(ctx, owner, repo, pr.Number)
		if err != nil {
			return 0, err
		}
	}
	if id != 0 {
		c, resp, err := g.c.Issues.UpdateComment(ctx, owner, repo, id, req)
		if err == nil {
			return c.GetID(), nil
		}
		if resp == nil || !notFound(resp.Response) {
			return 0, fmt.Errorf("github edit comment %d: %w", id, err)
		}
		// Deleted by someone: post a new one.
	}
	c, _, err := g.c.Issues.CreateComment(ctx, owner, repo, pr.Number, req)
	if err != nil {
		return 0, fmt.Errorf("github create comment: %w", err)
	}
	return c.GetID(), nil
}

// findComment returns the id of the comment on pull request n carrying
// previewMarker, or 0.
func (g *githubForge) findComment(ctx context.Context, owner, repo string, n int) (int64, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := g.c.Issues.ListComments(ctx, owner, repo, n, opts)
		if err != nil {
			return 0, fmt.Errorf("github list comments: %w", err)
		}
		for _, c := range cs {
			if strings.HasPrefix(c.GetBody(), previewMarker) {
				return c.GetID(), nil
			}
		}
		if resp.NextPage == 0 {
			return 0, nil
		}
		opts.Page = resp.NextPage
	}
}
