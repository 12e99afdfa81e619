package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// LogEndHeader is set to "true" on a logs answer that holds the job's last
// record: the job has finished and nothing follows.
const LogEndHeader = "Hoist-Log-End"

// LogFirstSeqHeader carries, on a logs answer, the oldest record the runner
// still keeps; records before it were acknowledged and deleted.
const LogFirstSeqHeader = "Hoist-Log-First-Seq"

// RunnerClient talks to one runner.
type RunnerClient struct{ c agentClient }

// NewRunnerClient returns a client of the runner at baseURL (TaskInfo.RunnerAddr,
// "unix:///path/runner.sock", or "http://host:port"). hc may dial through a
// tunnel and must then dial Unix sockets (see UnixDial); nil means a client
// that dials on this machine.
func NewRunnerClient(baseURL string, hc *http.Client) *RunnerClient {
	return &RunnerClient{c: newAgentClient(baseURL, hc, RunnerService, RunnerAPIVersion)}
}

// WithToken returns a client that authenticates with token (TaskInfo.RunnerToken)
// on every request, the health check included.
func (r *RunnerClient) WithToken(token string) *RunnerClient {
	c := *r
	c.c.token = token
	return &c
}

// Health asks the runner's health check. It fails with ErrIncompatibleAgent
// when the agent is not a runner of RunnerAPIVersion.
func (r *RunnerClient) Health(ctx context.Context) (Health, error) { return r.c.health(ctx) }

// Submit hands the job to the runner. It may be repeated until Run; after Run
// it fails with ErrConflict.
func (r *RunnerClient) Submit(ctx context.Context, spec JobSpec) error {
	return r.c.do(ctx, http.MethodPost, "/api/v1/submit", spec, nil)
}

// SendCodeManifest hands the runner the job's code manifest (see
// CodePath). It may be called after Submit and before Run; once the code is
// placed, a repeated call answers Placed and places nothing.
func (r *RunnerClient) SendCodeManifest(ctx context.Context, m CodeManifest) (CodeStatus, error) {
	var st CodeStatus
	err := r.c.do(ctx, http.MethodPost, CodePath, m, &st)
	return st, err
}

// SendCodeBlobs hands the runner blobs it said were missing: blobs is a
// gzip-compressed tar whose entries are named by their SHA-256 (see
// CodeBlobsPath), at most MaxCodeArchiveBytes long.
func (r *RunnerClient) SendCodeBlobs(ctx context.Context, blobs io.Reader) (CodeStatus, error) {
	resp, err := r.c.send(ctx, http.MethodPost, CodeBlobsPath, blobs, "application/gzip")
	if err != nil {
		return CodeStatus{}, err
	}
	defer resp.Body.Close()
	var st CodeStatus
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxCodeManifestBytes)).Decode(&st); err != nil {
		return st, fmt.Errorf("%s POST %s: decode answer: %w", r.c.service, CodeBlobsPath, err)
	}
	return st, nil
}

// Run starts the submitted job.
func (r *RunnerClient) Run(ctx context.Context) (RunResponse, error) {
	var out RunResponse
	err := r.c.do(ctx, http.MethodPost, "/api/v1/run", nil, &out)
	return out, err
}

// State returns the job's current state.
func (r *RunnerClient) State(ctx context.Context) (JobState, error) {
	var s JobState
	err := r.c.do(ctx, http.MethodGet, "/api/v1/state", nil, &s)
	return s, err
}

// Wait long-polls until the job has finished and returns its final state, or
// returns ctx's error when ctx ends first.
func (r *RunnerClient) Wait(ctx context.Context) (JobState, error) {
	for {
		var s JobState
		q := url.Values{"timeout_ms": {millis(r.c.longPoll())}}
		if err := r.c.do(ctx, http.MethodGet, "/api/v1/wait?"+q.Encode(), nil, &s); err != nil {
			return s, err
		}
		if s.Finished() {
			return s, nil
		}
		if err := ctx.Err(); err != nil {
			return s, err
		}
	}
}

// Stop stops the job: SIGTERM to its whole process group, SIGKILL after
// grace. It returns once the job has finished, with reason terminated_by_server.
func (r *RunnerClient) Stop(ctx context.Context, grace time.Duration) (JobState, error) {
	return r.StopWithReason(ctx, grace, ReasonTerminatedByServer, "")
}

// StopWithReason is Stop with the termination reason and message to record.
func (r *RunnerClient) StopWithReason(ctx context.Context, grace time.Duration, reason, message string) (JobState, error) {
	var s JobState
	err := r.c.do(ctx, http.MethodPost, "/api/v1/stop", StopRequest{GraceMillis: grace.Milliseconds(), Reason: reason, Message: message}, &s)
	return s, err
}

// Metrics samples the container's resource use.
func (r *RunnerClient) Metrics(ctx context.Context) (Metrics, error) {
	var m Metrics
	err := r.c.do(ctx, http.MethodGet, "/api/v1/metrics", nil, &m)
	return m, err
}

// Logs returns up to limit records with Seq > afterSeq (limit <= 0: the
// runner's default). It does not wait for new output.
func (r *RunnerClient) Logs(ctx context.Context, afterSeq int64, limit int) ([]LogLine, error) {
	lines, _, err := r.logs(ctx, url.Values{"after_seq": {strconv.FormatInt(afterSeq, 10)}, "limit": {strconv.Itoa(limit)}})
	return lines, err
}

// LogsSince returns up to limit records read at or after since.
func (r *RunnerClient) LogsSince(ctx context.Context, since time.Time, limit int) ([]LogLine, error) {
	lines, _, err := r.logs(ctx, url.Values{"since": {since.UTC().Format(time.RFC3339Nano)}, "limit": {strconv.Itoa(limit)}})
	return lines, err
}

// Follow calls fn for every record with Seq > afterSeq, in order, as the job
// writes them, and returns nil once the job has finished and fn has seen its
// last record. It returns fn's error if fn fails, ctx's error when ctx
// ends, and an error wrapping context.DeadlineExceeded when the runner holds
// one long poll longer than asked by more than longPollGrace (a runner that
// accepts connections but never answers). After any error the caller
// resumes with the last Seq fn accepted.
func (r *RunnerClient) Follow(ctx context.Context, afterSeq int64, fn func(LogLine) error) error {
	wait := r.c.longPoll()
	for {
		q := url.Values{
			"after_seq": {strconv.FormatInt(afterSeq, 10)},
			"limit":     {"100000"},
			"max_bytes": {strconv.Itoa(8 << 20)},
			"wait_ms":   {millis(wait)},
		}
		rctx, cancel := context.WithTimeout(ctx, wait+longPollGrace)
		lines, end, err := r.logs(rctx, q)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("logs: the runner did not answer a %s long poll within %s more: %w", wait, longPollGrace, err)
			}
			return err
		}
		for _, l := range lines {
			if l.Seq <= afterSeq {
				continue
			}
			if err := fn(l); err != nil {
				return err
			}
			afterSeq = l.Seq
		}
		if end {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (r *RunnerClient) logs(ctx context.Context, q url.Values) ([]LogLine, bool, error) {
	q.Set("format", "frames")
	resp, err := r.c.send(ctx, http.MethodGet, "/api/v1/logs?"+q.Encode(), nil, "")
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	lines, err := readFrames(resp)
	if err != nil {
		return lines, false, err
	}
	return lines, resp.Header.Get(LogEndHeader) == "true", nil
}

// readFrames decodes a response of log frames.
func readFrames(resp *http.Response) ([]LogLine, error) {
	if ct := resp.Header.Get("Content-Type"); ct != LogFramesContentType {
		return nil, fmt.Errorf("logs: content type %q, want %s", ct, LogFramesContentType)
	}
	br := bufio.NewReaderSize(resp.Body, 256<<10)
	var lines []LogLine
	for {
		l, err := ReadFrame(br)
		if errors.Is(err, io.EOF) {
			return lines, nil
		}
		if err != nil {
			return lines, fmt.Errorf("logs: %w", err)
		}
		lines = append(lines, l)
	}
}

// Ack tells the runner that every record up to seq is stored durably on the
// server's side, so that it may delete them from disk. Call it after
// persisting what Logs or Follow returned, never before.
func (r *RunnerClient) Ack(ctx context.Context, seq int64) (AckResponse, error) {
	var out AckResponse
	err := r.c.do(ctx, http.MethodPost, "/api/v1/logs/ack", AckRequest{Seq: seq}, &out)
	return out, err
}

// Artifacts asks the runner for the job's artifacts at paths (see
// ArtifactsPath): body is the uncompressed tar, for EachArtifact, and
// missing what the runner could not archive (ArtifactsMissingHeader). ctx
// bounds the whole transfer, the reading of body included; the caller
// closes body. The http.Client's Timeout, if any, bounds it too.
func (r *RunnerClient) Artifacts(ctx context.Context, paths []string) (body io.ReadCloser, missing []string, err error) {
	resp, err := r.c.send(ctx, http.MethodGet, ArtifactsPath+"?"+url.Values{"path": paths}.Encode(), nil, "")
	if err != nil {
		return nil, nil, err
	}
	if ct := resp.Header.Get("Content-Type"); ct != ArtifactsContentType {
		resp.Body.Close()
		return nil, nil, fmt.Errorf("%s GET %s: content type %q, want %s", r.c.service, ArtifactsPath, ct, ArtifactsContentType)
	}
	return resp.Body, parseArtifactsMissing(resp.Header.Get(ArtifactsMissingHeader)), nil
}

// DialSSH opens an SSH connection to the job (see SSHPath): the returned
// conn speaks SSH, the runner being the server, and hostKey is the
// runner's host key in authorized_keys form, for the caller to pin.
// authorizedKey, when not empty, is one authorized_keys line the runner
// accepts for this connection alone. ctx bounds the handshake only; the
// connection lives until closed. The http.Client must have no Timeout (it
// would cut the connection).
func (r *RunnerClient) DialSSH(ctx context.Context, authorizedKey string) (conn net.Conn, hostKey string, err error) {
	return dialUpgrade(ctx, &r.c, SSHPath, SSHUpgrade, http.Header{AuthorizedKeyHeader: nonEmpty(authorizedKey)})
}

// SSHActivity reports the job's SSH connections (dstack's inactivity).
func (r *RunnerClient) SSHActivity(ctx context.Context) (SSHActivity, error) {
	var a SSHActivity
	err := r.c.do(ctx, http.MethodGet, SSHActivityPath, nil, &a)
	return a, err
}

func nonEmpty(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}
