package web

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v5"
	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
)

// SSH into a run's job (GET /api/v1/runs/{name}/ssh): the client sends
// "Connection: Upgrade", "Upgrade: ssh" (SSHUpgrade) and its user's public
// key in SSHUserKeyHeader; the server answers 101 Switching Protocols with
// the job's SSH host key in SSHHostKeyHeader, and the connection then
// carries SSH to the job's runner (RFC 4253), the client being the SSH
// client.
const (
	// SSHUpgrade is the Upgrade header's protocol name.
	SSHUpgrade = api.SSHUpgrade
	// SSHUserKeyHeader carries the connecting user's public key in
	// authorized_keys form; the job accepts it for this connection only.
	SSHUserKeyHeader = "Hoist-SSH-Key"
	// SSHHostKeyHeader carries, on the 101 answer, the job's SSH host key
	// in authorized_keys form, for the client to pin.
	SSHHostKeyHeader = api.HostKeyHeader
)

// apiRunSSH connects the client to the SSH server of one of the run's jobs:
// ?job= (an id, submission id or number) or the newest running one. It
// answers 501 without a JobSSH controller, 400 without an upgrade to ssh or
// a valid user key, 404 when the job has ended (or the run has none), 409
// when it is not running yet, 502 when its runner cannot be reached, and
// otherwise splices the connection to the job's runner until either side
// closes it.
func (s *Server) apiRunSSH(c *echo.Context) error {
	jssh, ok := s.proj(c).Controller.(JobSSH)
	if !ok {
		return echo.NewHTTPError(http.StatusNotImplemented, "this server has no SSH into jobs")
	}
	r := c.Request()
	if !headerHasToken(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), SSHUpgrade) {
		return echo.NewHTTPError(http.StatusBadRequest, "send Connection: Upgrade and Upgrade: ssh")
	}
	userKey, err := userSSHKey(r.Header.Get(SSHUserKeyHeader))
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, SSHUserKeyHeader+": "+err.Error())
	}
	ctx := r.Context()
	run, err := s.proj(c).Store.GetRun(ctx, c.Param("name"))
	if err != nil {
		return err
	}
	job, err := sshJob(run, c.QueryParam("job"))
	if err != nil {
		return err
	}
	conn, hostKey, err := jssh.DialJobSSH(ctx, job.ID, userKey)
	if errors.Is(err, ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, "job "+job.JobName+" is not running")
	}
	if err != nil {
		s.log.Warn("ssh_dial_failed", "run", run.Name, "job", job.JobName, "error", err)
		return echo.NewHTTPError(http.StatusBadGateway, "cannot reach the job's runner: "+err.Error())
	}
	defer conn.Close()
	client, brw, err := http.NewResponseController(c.Response()).Hijack()
	if err != nil {
		return err
	}
	defer client.Close()
	if resp, _ := echo.UnwrapResponse(c.Response()); resp != nil {
		resp.Status, resp.Committed = http.StatusSwitchingProtocols, true // for the request log
	}
	// The server's read and write deadlines were for the request.
	_ = client.SetDeadline(time.Time{})
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + SSHUpgrade + "\r\n" +
		SSHHostKeyHeader + ": " + hostKey + "\r\n\r\n")
	if err := brw.Flush(); err != nil {
		return nil
	}
	user := principal(c).Name
	start := time.Now()
	s.metrics.sshConns.Inc()
	defer s.metrics.sshConns.Dec()
	s.log.Info("ssh_opened", "run", run.Name, "job", job.JobName, "user", user)
	up, down := splice(s.ctx, client, brw.Reader, conn)
	s.log.Info("ssh_closed", "run", run.Name, "job", job.JobName, "user", user,
		"duration", time.Since(start), "bytes_in", up, "bytes_out", down)
	return nil
}

// splice copies client (whose first bytes may be buffered in br) to job and
// job to client until either side ends or done is closed, then closes
// both; it returns the bytes copied each way.
func splice(done context.Context, client net.Conn, br io.Reader, job net.Conn) (up, down int64) {
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = client.Close()
			_ = job.Close()
		})
	}
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-done.Done(): // the server is closing
			closeBoth()
		case <-finished:
		}
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		up, _ = io.Copy(job, br)
		closeBoth()
	}()
	down, _ = io.Copy(client, job)
	closeBoth()
	wg.Wait()
	return up, down
}

// sshJob picks the job a run's SSH route connects to: the one ?job= names
// or the newest running one. A job that has not started running is a 409,
// one that ended (or no job at all) a 404.
func sshJob(run Run, id string) (Job, error) {
	if id != "" {
		j, ok := pickJob(run, id)
		if !ok {
			return Job{}, echo.NewHTTPError(http.StatusNotFound, "run "+run.Name+" has no job "+id)
		}
		return j, jobRunningErr(run, j)
	}
	for _, j := range run.Jobs {
		if j.Status == "running" {
			return j, nil
		}
	}
	for _, j := range run.Jobs {
		if !jobEnded(j.Status) {
			return j, jobRunningErr(run, j)
		}
	}
	return Job{}, echo.NewHTTPError(http.StatusNotFound, "run "+run.Name+" has no running job")
}

// jobRunningErr is nil for a running job, else the route's answer.
func jobRunningErr(run Run, j Job) error {
	switch {
	case j.Status == "running":
		return nil
	case jobEnded(j.Status):
		return echo.NewHTTPError(http.StatusNotFound, "job "+j.JobName+" of run "+run.Name+" is "+j.Status)
	}
	return echo.NewHTTPError(http.StatusConflict, "job "+j.JobName+" of run "+run.Name+" is "+j.Status+", not running yet")
}

// jobEnded reports whether a job status is terminating or terminal
// (dstack's JobStatus: terminating, terminated, aborted, failed, done).
func jobEnded(status string) bool {
	switch status {
	case "terminating", "terminated", "aborted", "failed", "done":
		return true
	}
	return false
}

// userSSHKey checks a user's public key in authorized_keys form and returns
// it without options or comment: only the key reaches the runner.
func userSSHKey(v string) (string, error) {
	if strings.TrimSpace(v) == "" {
		return "", errors.New("give the user's public key")
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(v))
	if err != nil {
		return "", errors.New("not a public key in authorized_keys form")
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), nil
}

// headerHasToken reports whether header name lists token (case-insensitive,
// comma-separated).
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
