package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// gitlabForge posts previews through GitLab's REST API: commit statuses
// (https://docs.gitlab.com/api/commits/#set-the-pipeline-status-of-a-commit)
// and merge request notes (https://docs.gitlab.com/api/notes/#merge-requests).
type gitlabForge struct {
	c *gitlab.Client
}

func newGitLabForge(api, token string, hc *http.Client) (*gitlabForge, error) {
	c, err := gitlab.NewClient(token, gitlab.WithBaseURL(api), gitlab.WithHTTPClient(hc), gitlab.WithCustomRetryMax(2))
	if err != nil {
		return nil, err
	}
	return &gitlabForge{c: c}, nil
}

// gitlabState maps a preview state to GitLab's: it has no "error" and
// says "failed" for "failure".
func gitlabState(s previewState) gitlab.BuildStateValue {
	switch s {
	case statePending:
		return gitlab.Pending
	case stateSuccess:
		return gitlab.Success
	}
	return gitlab.Failed
}

func (g *gitlabForge) setStatus(ctx context.Context, pr PRPlan, state previewState, desc, targetURL string) error {
	opt := &gitlab.SetCommitStatusOptions{State: gitlabState(state), Name: gitlab.Ptr(statusContext), Description: gitlab.Ptr(desc)}
	if targetURL != "" {
		opt.TargetURL = gitlab.Ptr(targetURL)
	}
	if pr.HeadRef != "" {
		opt.Ref = gitlab.Ptr(pr.HeadRef)
	}
	if _, _, err := g.c.Commits.SetCommitStatus(pr.Repo, pr.HeadSHA, opt, gitlab.WithContext(ctx)); err != nil {
		return fmt.Errorf("gitlab status: %w", err)
	}
	return nil
}

func (g *gitlabForge) upsertComment(ctx context.Context, pr PRPlan, id int64, body string) (int64, error) {
	mr := int64(pr.Number)
	if id == 0 {
		var err error
		if id, err = g.findNote(ctx, pr.Repo, mr); err != nil {
			return 0, err
		}
	}
	if id != 0 {
		n, resp, err := g.c.Notes.UpdateMergeRequestNote(pr.Repo, mr, id, &gitlab.UpdateMergeRequestNoteOptions{Body: gitlab.Ptr(body)}, gitlab.WithContext(ctx))
		if err == nil {
			return n.ID, nil
		}
		if resp == nil || !notFound(resp.Response) {
			return 0, fmt.Errorf("gitlab edit note %d: %w", id, err)
		}
	}
	n, _, err := g.c.Notes.CreateMergeRequestNote(pr.Repo, mr, &gitlab.CreateMergeRequestNoteOptions{Body: gitlab.Ptr(body)}, gitlab.WithContext(ctx))
	if err != nil {
		return 0, fmt.Errorf("gitlab create note: %w", err)
	}
	return n.ID, nil
}

// findNote returns the id of the note on merge request mr carrying
// previewMarker, or 0.
func (g *gitlabForge) findNote(ctx context.Context, project string, mr int64) (int64, error) {
	opt := &gitlab.ListMergeRequestNotesOptions{ListOptions: gitlab.ListOptions{PerPage: 100}}
	for {
		ns, resp, err := g.c.Notes.ListMergeRequestNotes(project, mr, opt, gitlab.WithContext(ctx))
		if err != nil {
			return 0, fmt.Errorf("gitlab list notes: %w", err)
		}
		for _, n := range ns {
			if !n.System && strings.HasPrefix(n.Body, previewMarker) {
				return n.ID, nil
			}
		}
		if resp.NextPage == 0 {
			return 0, nil
		}
		opt.Page = resp.NextPage
	}
}
