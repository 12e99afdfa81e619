package web

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"
)

// logPage is how many lines one store read returns.
const logPage = 1000

// apiRunLogs writes a job's output as text/plain, one line per log line.
// ?job= selects a submission (default: the newest), ?after= a cursor,
// ?since= (RFC 3339) drops lines written before that time and ?limit= a
// maximum number of lines read; ?follow=true keeps the response open
// and streams new lines until the job finishes or the client leaves.
func (s *Server) apiRunLogs(c *echo.Context) error {
	ctx := c.Request().Context()
	run, err := s.proj(c).Store.GetRun(ctx, c.Param("name"))
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
	var since time.Time
	if v := c.QueryParam("since"); v != "" {
		if since, err = time.Parse(time.RFC3339, v); err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, "since must be an RFC 3339 time")
		}
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
	fw := &follower{s: s, store: s.proj(c).Store, run: run.Name, job: job, checked: time.Now()}
	var written int64
	for {
		n := logPage
		if limit > 0 && limit-written < int64(n) {
			n = int(limit - written)
		}
		seen := s.logs.current()
		lines, err := s.proj(c).Store.ReadLogs(ctx, fw.job.ID, after, n)
		if err != nil {
			return err
		}
		renew()
		for _, l := range lines {
			after = l.Seq
			if l.Time.Before(since) {
				continue
			}
			bw.WriteString(l.Text)
			if !l.Partial { // the job's own bytes: no newline it did not print
				bw.WriteByte('\n')
			}
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

func lastSeq(lines []LogLine, after int64) int64 {
	if len(lines) == 0 {
		return after
	}
	return lines[len(lines)-1].Seq
}

// liveLogsURL is the SSE stream that continues after the lines shown, or
// empty when this page is not the last one (the script then stays idle).
func liveLogsURL(r Run, j Job, lines []LogLine, after int64, more bool) string {
	if more {
		return ""
	}
	return fmt.Sprintf("/runs/%s/logs/stream?job=%s&after=%d", r.Name, j.ID, lastSeq(lines, after))
}

// sseHeartbeat keeps idle streams alive through proxies.
const sseHeartbeat = 15 * time.Second

// pageLogStream follows a job's log over server-sent events. Each line is a
// "line" event whose id is the line's Seq, so a reconnecting EventSource
// resumes with Last-Event-ID; "status" events carry the job's status and an
// "end" event closes a finished job's stream.
func (s *Server) pageLogStream(c *echo.Context) error {
	ctx := c.Request().Context()
	run, err := s.proj(c).Store.GetRun(ctx, c.Param("name"))
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
	fw := &follower{s: s, store: s.proj(c).Store, run: run.Name, job: job, checked: time.Now()}
	lastStatus := ""
	lastBeat := time.Now()
	for {
		seen := s.logs.current()
		lines, err := s.proj(c).Store.ReadLogs(ctx, fw.job.ID, after, logPage)
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
