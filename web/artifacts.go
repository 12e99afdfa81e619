package web

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v5"
)

// Artifact is one file a job of a run left behind (the spec's
// `artifacts`), as GET /api/v1/runs/{name}/artifacts lists it.
type Artifact struct {
	// JobNum is the job's node index (0 but for multi-node tasks).
	JobNum int `json:"job_num"`
	// JobName is dstack's name of that job (run-job-replica); empty when
	// the run no longer knows the job.
	JobName string `json:"job_name"`
	// Path is the file's slash path relative to the job's working
	// directory.
	Path string `json:"path"`
	// Size is its length in bytes.
	Size int64 `json:"size"`
	// ModifiedAt is when it was stored.
	ModifiedAt time.Time `json:"modified_at"`
}

// Artifacts reads runs' artifact files. Runs are named as GetRun names
// them (the run of that name that is not deleted).
type Artifacts interface {
	// ListArtifacts returns the run's files sorted by job number and
	// path, or only job jobNum's when jobNum is not negative;
	// ErrNotFound when there is no such run.
	ListArtifacts(ctx context.Context, run string, jobNum int) ([]Artifact, error)
	// OpenArtifact opens one file (file a clean relative slash path);
	// ErrNotFound when there is no such run or file. The caller closes
	// the reader.
	OpenArtifact(ctx context.Context, run string, jobNum int, file string) (io.ReadCloser, Artifact, error)
}

// ValidArtifactPath reports whether p is a clean relative slash path that
// stays below its root: no leading slash, no empty, "." or ".." element,
// no backslash, control character or invalid UTF-8. The server refuses
// other paths, and `hoist artifacts get` never writes them.
func ValidArtifactPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, '\\') || !utf8.ValidString(p) {
		return false
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." {
			return false
		}
	}
	return path.Clean(p) == p
}

// apiRunArtifacts lists a run's artifact files; ?job=N keeps job N's.
func (s *Server) apiRunArtifacts(c *echo.Context) error {
	if s.proj(c).Artifacts == nil {
		return errUnavailable
	}
	job := -1
	if v := c.QueryParam("job"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return echo.NewHTTPError(http.StatusBadRequest, "job must be a job number (0, 1, …)")
		}
		job = n
	}
	arts, err := s.proj(c).Artifacts.ListArtifacts(c.Request().Context(), c.Param("name"), job)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, nonNil(arts))
}

// apiRunArtifact sends one artifact file as an attachment.
func (s *Server) apiRunArtifact(c *echo.Context) error {
	if s.proj(c).Artifacts == nil {
		return errUnavailable
	}
	job, err := strconv.Atoi(c.Param("job"))
	if err != nil || job < 0 {
		return echo.NewHTTPError(http.StatusBadRequest, "job must be a job number (0, 1, …)")
	}
	file, err := artifactParam(c)
	if err != nil {
		return err
	}
	rc, art, err := s.proj(c).Artifacts.OpenArtifact(c.Request().Context(), c.Param("name"), job, file)
	if err != nil {
		return err
	}
	defer rc.Close()
	w := c.Response()
	renew := s.streamDeadlines(w) // a large file may take longer than one answer's timeout
	renew()
	h := w.Header()
	h.Set(echo.HeaderContentType, "application/octet-stream")
	h.Set(echo.HeaderContentLength, strconv.FormatInt(art.Size, 10))
	h.Set(echo.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(file)}))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 256<<10)
	for {
		n, rerr := rc.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return nil // the client left
			}
			renew()
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			// The status is sent: all that is left is to cut the answer
			// short, which the client sees against Content-Length.
			s.log.Warn("artifact read failed", "run", c.Param("name"), "job", job, "path", file, "error", rerr)
			return nil
		}
	}
}

// artifactParam is the file path of an artifact route, unescaped, refused
// (400) unless ValidArtifactPath.
func artifactParam(c *echo.Context) (string, error) {
	p := c.Param("*")
	if c.Request().URL.RawPath != "" {
		// The router matched the escaped path (it does when that differs
		// from the path's default encoding, e.g. with %2F): the parameter is
		// still escaped. Otherwise it is already the decoded path.
		u, err := url.PathUnescape(p)
		if err != nil {
			return "", echo.NewHTTPError(http.StatusBadRequest, "path is not a valid escaped URL path")
		}
		p = u
	}
	if !ValidArtifactPath(p) {
		return "", echo.NewHTTPError(http.StatusBadRequest, "path must be a relative path below the job's working directory, without . or .. elements")
	}
	return p, nil
}

// ArtifactPath is the path below /api/v1 that downloads a run's artifact
// file, each element escaped: /runs/{name}/artifacts/{job}/{path…}.
func ArtifactPath(run string, jobNum int, file string) string {
	parts := strings.Split(file, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "/runs/" + url.PathEscape(run) + "/artifacts/" + strconv.Itoa(jobNum) + "/" + strings.Join(parts, "/")
}

// fmtSize writes a byte count for people: B, KiB, MiB, GiB or TiB with
// one decimal above bytes.
func fmtSize(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + unit
}
