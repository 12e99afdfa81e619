package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v5"
)

// RunnerDownloadTTL is how long a granted runner download stays valid: a
// pod fetches the runner right after it starts, but pulling a large image
// comes first.
const RunnerDownloadTTL = 2 * time.Hour

// RunnerDownloads grants and serves the downloads of the hoist-runner
// binary that container clouds' pods make at start (backends/podcloud,
// Deps.RunnerDownload): GET /agents/runner/<arch> with a bearer token that
// names one task and architecture and expires. Tokens are signed with a
// key derived from the server's secret key, so that every server on the
// database accepts the tokens of the others.
type RunnerDownloads struct {
	key    []byte
	binary func(arch string) (path string, err error)
	now    func() time.Time
	base   atomic.Pointer[string]
}

// NewRunnerDownloads returns the downloads signed with a key derived from
// secret (the store's secret key), serving the runner binary binary
// returns for an architecture. now is the clock; nil means time.Now.
func NewRunnerDownloads(secret []byte, binary func(arch string) (string, error), now func() time.Time) *RunnerDownloads {
	if now == nil {
		now = time.Now
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("hoist runner downloads"))
	return &RunnerDownloads{key: mac.Sum(nil), binary: binary, now: now}
}

// SetBaseURL sets the server's base URL as pods reach it (the external
// URL, or the address it listens on); Grant fails until it is set.
func (d *RunnerDownloads) SetBaseURL(u string) {
	u = strings.TrimRight(u, "/")
	d.base.Store(&u)
}

// Grant returns the URL of the runner for arch and the bearer token that
// lets task taskID download it until RunnerDownloadTTL has passed.
func (d *RunnerDownloads) Grant(taskID, arch string) (url, token string, err error) {
	base := d.base.Load()
	if base == nil {
		return "", "", errors.New("runner downloads: the server does not serve yet")
	}
	if arch != "amd64" && arch != "arm64" {
		return "", "", fmt.Errorf("runner downloads: architecture %q", arch)
	}
	exp := d.now().Add(RunnerDownloadTTL).Unix()
	claim := base64.RawURLEncoding.EncodeToString([]byte(taskID + "\n" + arch + "\n" + strconv.FormatInt(exp, 10)))
	return *base + "/agents/runner/" + arch, claim + "." + d.sign(claim), nil
}

func (d *RunnerDownloads) sign(claim string) string {
	mac := hmac.New(sha256.New, d.key)
	mac.Write([]byte(claim))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// verify returns the task a token grants arch's download to, and why not
// when it does not.
func (d *RunnerDownloads) verify(token, arch string) (string, error) {
	claim, sig, ok := strings.Cut(token, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(d.sign(claim))) {
		return "", errors.New("the token is not one this server granted")
	}
	raw, err := base64.RawURLEncoding.DecodeString(claim)
	if err != nil {
		return "", errors.New("the token is malformed")
	}
	parts := strings.Split(string(raw), "\n")
	if len(parts) != 3 {
		return "", errors.New("the token is malformed")
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	switch {
	case err != nil:
		return "", errors.New("the token is malformed")
	case parts[1] != arch:
		return "", fmt.Errorf("the token is for %s, not %s", parts[1], arch)
	case d.now().Unix() > exp:
		return "", errors.New("the token has expired")
	}
	return parts[0], nil
}

// runnerDownload serves GET /agents/runner/:arch to a pod holding a grant.
func (s *Server) runnerDownload(c *echo.Context) error {
	d := s.deps.RunnerDownloads
	if d == nil {
		return echo.NewHTTPError(http.StatusNotFound, "this server serves no runner downloads")
	}
	arch := c.Param("arch")
	token, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer ")
	if !ok {
		return echo.NewHTTPError(http.StatusUnauthorized, "a bearer token is required")
	}
	task, err := d.verify(strings.TrimSpace(token), arch)
	if err != nil {
		s.log.Info("runner_download_refused", "arch", arch, "reason", err.Error(), "remote", c.RealIP())
		return echo.NewHTTPError(http.StatusUnauthorized, err.Error())
	}
	path, err := d.binary(arch)
	if err != nil {
		return echo.NewHTTPError(http.StatusNotFound, "no runner for "+arch+": "+err.Error())
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("runner binary: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("runner binary: %w", err)
	}
	s.log.Info("runner_download", "task_id", task, "arch", arch, "bytes", st.Size(), "remote", c.RealIP())
	c.Response().Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(c.Response(), c.Request(), "hoist-runner", st.ModTime(), f)
	return nil
}
