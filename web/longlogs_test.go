package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"hoist/store"
)

func get(t *testing.T, url, tok string) *goquery.Document {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	d, err := goquery.NewDocumentFromReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRunPage_longLogsArePagedAndOpenOnTheNewest(t *testing.T) {
	e := newLiveEnv(t)
	var lines []store.LogLine
	for i := 1; i <= 1200; i++ {
		lines = append(lines, store.LogLine{Stream: "stdout", Data: fmt.Appendf(nil, "step %d\n", i)})
	}
	if _, err := e.st.AppendLogs(context.Background(), e.seeded.TrainJob, lines); err != nil {
		t.Fatal(err)
	}
	tok := e.seeded.Tokens.Viewer
	d := get(t, e.url+"/runs/train", tok)
	spans := d.Find(`[data-testid=logs] .ln`)
	// The fixture's first line plus 1200: the page shows the newest 500.
	if spans.Length() != 500 || spans.First().Text() != "step 701\n" || spans.Last().Text() != "step 1200\n" {
		t.Fatalf("newest page: %d lines, %q … %q", spans.Length(), spans.First().Text(), spans.Last().Text())
	}
	if src, _ := d.Find(`[data-testid=logs]`).Attr("data-live-logs"); !strings.HasSuffix(src, "after=1201") {
		t.Errorf("live source %q does not continue after the last line shown", src)
	}
	href, ok := d.Find(`[data-testid=logs-earlier]`).Attr("href")
	if !ok {
		t.Fatal("no link to earlier lines")
	}
	d = get(t, e.url+href, tok)
	spans = d.Find(`[data-testid=logs] .ln`)
	if spans.First().Text() != "step 201\n" || spans.Length() != 500 {
		t.Errorf("earlier page: %d lines from %q", spans.Length(), spans.First().Text())
	}
	if src, _ := d.Find(`[data-testid=logs]`).Attr("data-live-logs"); src != "" {
		t.Errorf("an older page follows live: %q", src)
	}
	if d.Find(`[data-testid=logs-next]`).Length() != 1 {
		t.Error("no link to later lines")
	}
}

// TestRunLogsText_incompleteLineIsContinuedNotBroken checks that the
// plain-text log gives the job's bytes back as it printed them: a line the
// runner recorded before its newline came (a pause in the output) is
// followed by its continuation, with no newline added between them.
func TestRunLogsText_incompleteLineIsContinuedNotBroken(t *testing.T) {
	e := newLiveEnv(t)
	seq, err := e.st.AppendLogs(context.Background(), e.seeded.TrainJob, []store.LogLine{
		{Stream: "stdout", Data: []byte("1039\n1040\n104")},
		{Stream: "stdout", Data: []byte("1\n1042\n")},
		{Stream: "stdout", Data: []byte("50%")},
		{Stream: "stdout", Data: []byte(" 100%\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/runs/train/logs?after=%d", e.url, seq-4), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.seeded.Tokens.Viewer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if want := "1039\n1040\n1041\n1042\n50% 100%\n"; string(body) != want {
		t.Errorf("logs = %q, want %q", body, want)
	}
}
