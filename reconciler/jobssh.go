package reconciler

import (
	"context"
	"fmt"
	"net"

	"hoist/agents/api"
	"hoist/store"
)

// DialJobSSH opens an SSH connection to the runner of the job with id jobID
// (RunnerClient.DialSSH) through the connection the controller holds to the
// job's instance, never a public port: `hoist attach` and `hoist ssh` reach
// a job the way dstack's CLI does, with the runner as the SSH server.
// userKey is the connecting user's public key (authorized_keys form), which
// the runner accepts for this connection besides Config.SSHAuthorizedKeys.
// It fails with an error wrapping store.ErrNotFound when the job does not
// exist or is not running. ctx bounds the dial only: the connection lives
// until it is closed, and holds no reference on the instance's connection
// (those are kept per instance until the instance goes).
func (c *Controller) DialJobSSH(ctx context.Context, jobID, userKey string) (net.Conn, string, error) {
	job, err := c.st.GetJob(ctx, jobID)
	if err != nil {
		return nil, "", fmt.Errorf("ssh into job %s: %w", jobID, err)
	}
	if job.Status != store.JobRunning || job.RunnerAddr == "" {
		return nil, "", fmt.Errorf("ssh into job %s: it is %s, not running: %w", job.JobName, job.Status, store.ErrNotFound)
	}
	_, conn, err := c.shimFor(ctx, job.InstanceID)
	if err != nil {
		return nil, "", fmt.Errorf("ssh into job %s: %w", job.JobName, err)
	}
	sc, hostKey, err := api.NewRunnerClient(job.RunnerAddr, conn.HTTPClient()).DialSSH(ctx, userKey)
	if err != nil {
		return nil, "", fmt.Errorf("ssh into job %s: %w", job.JobName, err)
	}
	return sc, hostKey, nil
}
