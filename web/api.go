package web

import (
	"bufio"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"
)

// logPage is how many lines one store read returns.
const logPage = 1000

func (s *Server) apiListRuns(c *echo.Context) error {
	f, err := runFilter(c)
	if err != nil {
		return err
	}
	runs, err := s.runList.list(c.Request().Context(), s.deps.Store, f)
	if err != nil {
		return err
	}
	out := make([]Run, len(runs)) // the cached slice is shared
	for i, r := range runs {
		if r.Jobs == nil {
			r.Jobs = []Job{}
		}
		out[i] = r
	}
	return c.JSON(http.StatusOK, out)
}

func runFilter(c *echo.Context) (RunFilter, error) {
	f := RunFilter{Status: c.QueryParam("status"), Type: c.QueryParam("type"), Fleet: c.QueryParam("fleet")}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return f, echo.NewHTTPError(http.StatusBadRequest, "limit must be a non-negative integer")
		}
		f.Limit = n
	}
	return f, nil
}

func (s *Server) apiGetRun(c *echo.Context) error {
	run, err := s.deps.Store.GetRun(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiRun(run))
}

// pickJob returns the job of run that ?job= (an id or submission id) names,
// or the newest.
func pickJob(run Run, id string) (Job, bool) {
	if len(run.Jobs) == 0 {
		return Job{}, false
	}
	if id == "" {
		return run.Jobs[0], true
	}
	for _, j := range run.Jobs {
		if j.ID == id || j.SubmissionID == id || strconv.Itoa(j.SubmissionNum) == id {
			return j, true
		}
	}
	return Job{}, false
}

func int64Param(c *echo.Context, name string, def int64) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, echo.NewHTTPError(http.StatusBadRequest, name+" must be a non-negative integer")
	}
	return n, nil
}

// apiRunLogs writes a job's output as text/plain, one line per log line.
// ?job= selects a submission (default: the newest), ?after= a cursor and
// ?limit= a maximum number of lines; ?follow=true keeps the response open
// and streams new lines until the job finishes or the client leaves.
func (s *Server) apiRunLogs(c *echo.Context) error {
	ctx := c.Request().Context()
	run, err := s.deps.Store.GetRun(ctx, c.Param("name"))
	if err != nil {
		return err
	}
	after, err := int64Param(c, "after", 0)
	if err != nil {
		return err
	}
	limit, err := int64Param(c, "limit", 0)
	if err != nil {
		return err
	}
	follow := c.QueryParam("follow") == "true" || c.QueryParam("follow") == "1"
	job, ok := pickJob(run, c.QueryParam("job"))
	w := c.Response()
	renew := s.streamDeadlines(w) // followed or long (up to the log quota): see Timeouts
	renew()
	w.Header().Set(echo.HeaderContentType, "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !ok {
		if c.QueryParam("job") != "" {
			return echo.NewHTTPError(http.StatusNotFound, "no such job")
		}
		w.WriteHeader(http.StatusOK)
		return nil
	}
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	fw := &follower{s: s, run: run.Name, job: job, checked: time.Now()}
	var written int64
	for {
		n := logPage
		if limit > 0 && limit-written < int64(n) {
			n = int(limit - written)
		}
		seen := s.logs.current()
		lines, err := s.deps.Store.ReadLogs(ctx, fw.job.ID, after, n)
		if err != nil {
			return err
		}
		renew()
		for _, l := range lines {
			bw.WriteString(l.Text)
			bw.WriteByte('\n')
			after = l.Seq
		}
		written += int64(len(lines))
		if limit > 0 && written >= limit {
			break
		}
		if len(lines) == n {
			continue
		}
		if !follow || (finished(fw.job.Status) && len(lines) == 0) {
			break
		}
		if err := bw.Flush(); err != nil {
			return nil
		}
		http.NewResponseController(w).Flush()
		notified := true
		if !finished(fw.job.Status) {
			var ok bool
			if notified, ok = s.waitLogs(ctx, seen); !ok {
				break
			}
		}
		fw.refresh(ctx, notified)
	}
	return bw.Flush()
}

// finished reports whether a job or run status is terminal.
func finished(status string) bool {
	switch status {
	case "terminated", "failed", "done", "aborted":
		return true
	}
	return false
}

func (s *Server) apiSyncStatus(c *echo.Context) error {
	st, err := s.deps.Syncer.SyncStatus(c.Request().Context())
	if err != nil {
		return err
	}
	if st.Errors == nil {
		st.Errors = []string{}
	}
	return c.JSON(http.StatusOK, st)
}

// syncAccepted is the answer to POST /api/v1/sync.
type syncAccepted struct {
	Requested uint64 `json:"requested"`
	Message   string `json:"message"`
}

func (s *Server) apiSync(c *echo.Context) error {
	n := s.trig.request()
	if c.QueryParam("wait") == "true" {
		if err := s.trig.waitHandled(c.Request().Context(), n); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, syncAccepted{Requested: n, Message: "sync done"})
	}
	return c.JSON(http.StatusAccepted, syncAccepted{Requested: n, Message: "sync requested"})
}

func (s *Server) apiWhoami(c *echo.Context) error {
	return c.JSON(http.StatusOK, principal(c))
}
