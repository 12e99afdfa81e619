package web

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"
)

// sseHeartbeat keeps idle streams alive through proxies.
const sseHeartbeat = 15 * time.Second

// pageLogStream follows a job's log over server-sent events. Each line is a
// "line" event whose id is the line's Seq, so a reconnecting EventSource
// resumes with Last-Event-ID; "status" events carry the job's status and an
// "end" event closes a finished job's stream.
func (s *Server) pageLogStream(c *echo.Context) error {
	ctx := c.Request().Context()
	run, err := s.deps.Store.GetRun(ctx, c.Param("name"))
	if err != nil {
		return err
	}
	job, ok := pickJob(run, c.QueryParam("job"))
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound, "no such job")
	}
	after, err := int64Param(c, "after", 0)
	if err != nil {
		return err
	}
	if id := c.Request().Header.Get("Last-Event-ID"); id != "" {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil && n > after {
			after = n
		}
	}
	w := c.Response()
	renew := s.streamDeadlines(w) // a live stream: see Timeouts
	renew()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(w, 16<<10)
	flush := func() bool {
		renew()
		if bw.Flush() != nil || rc.Flush() != nil {
			return false
		}
		return true
	}
	bw.WriteString("retry: 2000\n\n")
	fw := &follower{s: s, run: run.Name, job: job, checked: time.Now()}
	lastStatus := ""
	lastBeat := time.Now()
	for {
		seen := s.logs.current()
		lines, err := s.deps.Store.ReadLogs(ctx, fw.job.ID, after, logPage)
		if err != nil {
			return nil // the stream is committed; the client reconnects
		}
		renew()
		for _, l := range lines {
			writeSSE(bw, "line", strconv.FormatInt(l.Seq, 10), l.Text)
			after = l.Seq
		}
		if len(lines) == logPage {
			if !flush() {
				return nil
			}
			continue
		}
		if fw.job.Status != lastStatus {
			writeSSE(bw, "status", "", fw.job.Status)
			lastStatus = fw.job.Status
		}
		if finished(fw.job.Status) && len(lines) == 0 {
			writeSSE(bw, "end", "", fw.job.Status)
			flush()
			return nil
		}
		if time.Since(lastBeat) >= sseHeartbeat {
			bw.WriteString(": ping\n\n")
			lastBeat = time.Now()
		}
		if !flush() {
			return nil
		}
		notified := true
		if !finished(fw.job.Status) {
			var ok bool
			if notified, ok = s.waitLogs(ctx, seen); !ok {
				return nil
			}
		}
		fw.refresh(ctx, notified)
	}
}

// writeSSE writes one event; a multi-line payload becomes several data
// fields, which EventSource joins with newlines.
func writeSSE(w *bufio.Writer, event, id, data string) {
	if event != "" {
		w.WriteString("event: " + event + "\n")
	}
	if id != "" {
		w.WriteString("id: " + id + "\n")
	}
	for _, part := range strings.Split(strings.ReplaceAll(data, "\r", ""), "\n") {
		w.WriteString("data: " + part + "\n")
	}
	w.WriteString("\n")
}
