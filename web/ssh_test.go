package web

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v5"
)

func TestSSHJob_picksTheRunningJobOrSaysWhyNot(t *testing.T) {
	running := Job{ID: "j2", JobName: "dev-0-0", SubmissionNum: 1, Status: "running"}
	failed := Job{ID: "j1", JobName: "dev-0-0", Status: "failed"}
	pulling := Job{ID: "j3", JobName: "dev-0-0", SubmissionNum: 2, Status: "pulling"}
	for name, tc := range map[string]struct {
		jobs   []Job
		job    string
		want   string
		status int
	}{
		"newest running job":               {jobs: []Job{running, failed}, want: "j2"},
		"running job behind a pulling one": {jobs: []Job{pulling, running}, want: "j2"},
		"only a pulling job is a conflict": {jobs: []Job{pulling, failed}, status: http.StatusConflict},
		"only finished jobs":               {jobs: []Job{failed}, status: http.StatusNotFound},
		"no job":                           {status: http.StatusNotFound},
		"a named finished job":             {jobs: []Job{running, failed}, job: "0", status: http.StatusNotFound},
		"a named running job":              {jobs: []Job{running, failed}, job: "j2", want: "j2"},
		"a named job that does not exist":  {jobs: []Job{running}, job: "9", status: http.StatusNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			j, err := sshJob(Run{Name: "dev", Jobs: tc.jobs}, tc.job)
			if tc.status != 0 {
				if sc := echo.StatusCode(err); sc != tc.status {
					t.Fatalf("sshJob = %v (%d), want %d", err, sc, tc.status)
				}
				return
			}
			if err != nil || j.ID != tc.want {
				t.Fatalf("sshJob = %s, %v; want %s", j.ID, err, tc.want)
			}
		})
	}
}
