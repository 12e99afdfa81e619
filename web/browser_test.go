package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"hoist/backends/offers"
	"hoist/e2e/testenv"
	"hoist/store"
	"hoist/web"
	"hoist/web/internal/fixture"
	"hoist/web/storeview"

	"net/http/httptest"
)

// Browser tests drive Debian's Chromium (headless, no sandbox, no
// background networking, fresh profile) against the real web server over a
// real SQLite store. One browser serves every test; each test gets a tab.

var (
	browserOnce   sync.Once
	browserCtx    context.Context
	browserErr    error
	browserCancel context.CancelFunc
)

func chromiumPath() string {
	if p := os.Getenv("CHROMEDP_TEST_RUNNER"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

func TestMain(m *testing.M) {
	code := m.Run()
	if browserCancel != nil {
		browserCancel()
	}
	os.Exit(code)
}

// browser returns a fresh tab, skipping (or failing in CI) without Chromium.
func browser(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIP: browser tests do not run with -short")
	}
	testenv.Require(t, chromiumPath())
	browserOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hoist-chromium-")
		if err != nil {
			browserErr = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromiumPath()),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.UserDataDir(dir),
			chromedp.Flag("disable-background-networking", true),
			chromedp.WindowSize(1280, 900),
		)
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(allocCtx)
		if err := chromedp.Do(ctx); err != nil {
			browserErr = err
		}
		browserCtx = ctx
		browserCancel = func() { cancel(); cancelAlloc(); os.RemoveAll(dir) }
	})
	if browserErr != nil {
		t.Fatalf("start chromium: %v", browserErr)
	}
	tab, cancel := chromedp.NewContext(browserCtx)
	tab, cancelTimeout := context.WithTimeout(tab, 60*time.Second)
	var mu sync.Mutex
	var jsErrors []string
	if err := chromedp.Listen(tab, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			d := e.ExceptionDetails
			msg := fmt.Sprintf("%s at %s:%d:%d", d.Text, d.URL, d.LineNumber+1, d.ColumnNumber+1)
			if d.Exception != nil && d.Exception.Description != "" {
				msg += ": " + d.Exception.Description
			}
			jsErrors = append(jsErrors, msg)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("open tab: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			sctx, c := context.WithTimeout(tab, 5*time.Second)
			if png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100)); err == nil {
				p := filepath.Join(os.TempDir(), fmt.Sprintf("hoist-web-%s-%d.png", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano()))
				if os.WriteFile(p, png, 0o644) == nil {
					t.Logf("screenshot of the failing page: %s", p)
				}
			}
			c()
		}
		mu.Lock()
		for _, e := range jsErrors {
			t.Errorf("page JavaScript exception: %s", e)
		}
		mu.Unlock()
		cancelTimeout()
		cancel()
	})
	return tab
}

// liveEnv is a web server over a real store with fixture data.
type liveEnv struct {
	url    string
	srv    *web.Server
	st     *store.Store
	seeded fixture.Seeded
}

type noopSyncer struct{ *storeview.View }

func (noopSyncer) RequestSync() uint64 { return 1 }

func (noopSyncer) WaitSynced(context.Context, uint64) error { return nil }

// serveStatus is the dashboard of the fixture's service serve: one ready
// replica and a few minutes of samples.
type serveStatus struct{ now time.Time }

func (s serveStatus) ServiceStatus(_ context.Context, _, run string) (web.ServiceStatus, error) {
	if run != "serve" {
		return web.ServiceStatus{}, web.ErrNotFound
	}
	st := web.ServiceStatus{RPS: 3.2, RPSWindowSeconds: 60, MinReplicas: 1, MaxReplicas: 2, DesiredReplicas: 1, ReadyReplicas: 1,
		HistoryIntervalSeconds: 10,
		Replicas: []web.ServiceReplicaStatus{{JobID: "serve-job", JobName: "serve-0-0", ReplicaNum: 0, Status: "running",
			Address: "127.0.0.1:8000", Ready: true, Probes: []web.ProbeStatus{{Method: "get", URL: "/health", Passes: 2, ReadyAfter: 1}}}}}
	for i := range 30 {
		st.History = append(st.History, web.ServiceSample{At: s.now.Add(time.Duration(i-30) * 10 * time.Second),
			RPS: float64(i%7) * 0.8, Replicas: 1 + i/20, DesiredReplicas: 1 + i/18})
	}
	return st, nil
}

// specPlanner serves normalized specs of the fixture's two revisions.
type specPlanner struct{ seeded fixture.Seeded }

func (p specPlanner) PlanFiles(context.Context, map[string][]byte) (web.Plan, error) {
	return web.Plan{Valid: true}, nil
}

func (p specPlanner) PlanRevision(context.Context, string, string) (web.Plan, error) {
	return web.Plan{Valid: true}, nil
}

func (p specPlanner) SpecsAt(_ context.Context, sha string) (map[string]json.RawMessage, error) {
	hello := `{"type":"task","name":"hello","image":"busybox","commands":["echo hello"]}`
	train := `{"type":"task","name":"train","image":"pytorch","commands":["python train.py"],"resources":{"gpu":"A100:1"},"env":[{"name":"WANDB_API_KEY","value":"secret-wandb"}]}`
	if sha == p.seeded.RevNew {
		hello = `{"type":"task","name":"hello","image":"busybox","commands":["echo hello","echo world"]}`
		train = strings.Replace(train, "A100:1", "A100:2", 1)
	}
	return map[string]json.RawMessage{"task/hello": json.RawMessage(hello), "task/train": json.RawMessage(train)}, nil
}

func newLiveEnv(t testing.TB) *liveEnv {
	t.Helper()
	now := time.Now().UTC()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "hoist.db"), store.Options{SecretKey: []byte("browser-test-secret-key-32-bytes")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	seeded, err := fixture.Seed(context.Background(), st, now)
	if err != nil {
		t.Fatal(err)
	}
	view := storeview.New(st, "")
	cat, err := offers.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{AdminToken: "bootstrap-admin"}, web.Deps{
		Store: view, Syncer: noopSyncer{view}, Tokens: view, Inventory: view,
		Planner: specPlanner{seeded}, Offers: web.CatalogOffers{Catalog: cat}, Secrets: view,
		ServiceStatuses: serveStatus{now: now},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close() // ends live streams a tab may still hold open
		ts.Close()
	})
	return &liveEnv{url: ts.URL, srv: srv, st: st, seeded: seeded}
}

// css selects the first element matching a CSS selector.
type css = chromedp.CSS

// login signs in through the form.
func (e *liveEnv) login(tok string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(e.url+"/runs"),
		chromedp.WaitVisible(css(`[data-testid=login-token]`)),
		chromedp.SendKeys(css(`[data-testid=login-token]`), tok),
		chromedp.Click(css(`[data-testid=login-submit]`)),
		chromedp.WaitVisible(css(`[data-testid=runs-table]`)),
	)
}

// shoot saves a screenshot when HOIST_SCREENSHOTS names a directory.
func shoot(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		dir := os.Getenv("HOIST_SCREENSHOTS")
		if dir == "" {
			return nil
		}
		png, err := chromedp.FullScreenshot(100)(ctx, t)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	})
}

// text reads the visible text of the first element matching sel.
func text(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(tab, chromedp.Text(css(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// poll waits until the JavaScript expression is truthy.
func poll(expr string, d time.Duration) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(5*time.Millisecond), chromedp.WithPollingTimeout(d))
}

func TestBrowser_loginAndRunsList(t *testing.T) {
	tab := browser(t)
	e := newLiveEnv(t)
	if err := chromedp.Do(tab, e.login(e.seeded.Tokens.Viewer), shoot("runs")); err != nil {
		t.Fatal(err)
	}
	rows := text(t, tab, `[data-testid=runs-table] tbody`)
	for _, want := range []string{"hello", "train", "serve", "running", "done"} {
		if !strings.Contains(rows, want) {
			t.Errorf("runs table lacks %q:\n%s", want, rows)
		}
	}
	if who := text(t, tab, `[data-testid=whoami]`); who != "victor (viewer)" {
		t.Errorf("whoami = %q", who)
	}
	// A viewer sees no action buttons.
	if err := chromedp.Do(tab, chromedp.Navigate(e.url+"/"), chromedp.WaitVisible(css(`[data-testid=sync-panel]`)), shoot("overview-viewer")); err != nil {
		t.Fatal(err)
	}
	if n := eval[int](t, tab, `document.querySelectorAll("[data-testid=sync-now]").length`); n != 0 {
		t.Errorf("viewer sees %d sync buttons", n)
	}
}

func TestBrowser_liveLogsAndStatusOverSSE(t *testing.T) {
	tab := browser(t)
	e := newLiveEnv(t)
	if err := chromedp.Do(tab,
		e.login(e.seeded.Tokens.User),
		chromedp.Navigate(e.url+"/runs/train"),
		chromedp.WaitVisible(css(`[data-testid=logs]`)),
		poll(`document.querySelector("[data-testid=logs]").getAttribute("data-job-status") === "running"`, 10*time.Second),
	); err != nil {
		t.Fatal(err)
	}
	// Lines appended to the store arrive without a reload.
	for i := 2; i <= 4; i++ {
		line := fmt.Sprintf("epoch %d loss=0.%d", i, 9-i)
		start := time.Now()
		if _, err := e.st.AppendLogs(context.Background(), e.seeded.TrainJob, []store.LogLine{{Stream: "stdout", Data: []byte(line + "\n")}}); err != nil {
			t.Fatal(err)
		}
		if i < 4 { // the last line relies on the followers' polling alone
			e.srv.NotifyLogs()
		}
		js := fmt.Sprintf(`document.querySelector("[data-testid=logs]").textContent.includes(%q)`, line)
		if err := chromedp.Do(tab, poll(js, 10*time.Second)); err != nil {
			t.Fatalf("line %q never arrived: %v", line, err)
		}
		t.Logf("line %d reached the page after %v (notified: %v)", i, time.Since(start), i < 4)
	}
	// The run finishing is followed live too.
	ctx := context.Background()
	job, err := e.st.GetJob(ctx, e.seeded.TrainJob)
	if err != nil {
		t.Fatal(err)
	}
	job.Status, job.FinishedAt, job.ExitCode = store.JobDone, time.Now().UTC(), new(int)
	if err := e.st.UpdateJob(ctx, &job); err != nil {
		t.Fatal(err)
	}
	run, err := e.st.GetRunByName(ctx, "", "train")
	if err != nil {
		t.Fatal(err)
	}
	run.Status, run.StatusMessage = store.RunDone, "exited (0)"
	if err := e.st.UpdateRun(ctx, &run); err != nil {
		t.Fatal(err)
	}
	e.srv.NotifyLogs()
	if err := chromedp.Do(tab,
		chromedp.WaitVisible(css(`[data-testid=logs][data-ended=true]`)),
		poll(`document.querySelector("[data-testid=run-status]").textContent.trim() === "done"`, 10*time.Second),
		shoot("run-train"),
	); err != nil {
		t.Fatal(err)
	}
}

func TestBrowser_offersFilter(t *testing.T) {
	tab := browser(t)
	e := newLiveEnv(t)
	if err := chromedp.Do(tab,
		e.login(e.seeded.Tokens.Viewer),
		chromedp.Navigate(e.url+"/offers"),
		chromedp.WaitVisible(css(`[data-testid=offers-gpu]`)),
		chromedp.SendKeys(css(`[data-testid=offers-gpu]`), "H100:8"),
		chromedp.Click(css(`[data-testid=offers-submit]`)),
		chromedp.WaitVisible(css(`input[name=gpu][value="H100:8"]`)),
		chromedp.WaitVisible(css(`[data-testid=offer-row]`)),
		shoot("offers"),
	); err != nil {
		t.Fatal(err)
	}
	rows := eval[[]string](t, tab, `Array.from(document.querySelectorAll("[data-testid=offer-row]")).map(r => r.textContent)`)
	if len(rows) == 0 {
		t.Fatal("no offers for H100:8")
	}
	for _, r := range rows {
		if !strings.Contains(r, "8xH100") {
			t.Errorf("row does not match the filter: %q", r)
		}
	}
	if url, err := chromedp.Run(tab, chromedp.Location()); err != nil || !strings.Contains(url, "gpu=H100%3A8") {
		t.Errorf("filter is not in the URL (bookmarkable): %s %v", url, err)
	}
}

func TestBrowser_revisionDiff(t *testing.T) {
	tab := browser(t)
	e := newLiveEnv(t)
	if err := chromedp.Do(tab,
		e.login(e.seeded.Tokens.Admin),
		chromedp.Navigate(e.url+"/history"),
		chromedp.WaitVisible(css(`[data-testid=revisions-table]`)),
		shoot("history"),
		chromedp.Click(css(`[data-testid=diff-link-222222222222]`)),
		chromedp.WaitVisible(css(`[data-testid=diff-body]`)),
		shoot("diff"),
	); err != nil {
		t.Fatal(err)
	}
	body := eval[string](t, tab, `document.body.innerText`)
	for _, want := range []string{`+     "echo world"`, `-     "gpu": "A100:1"`, `+     "gpu": "A100:2"`} {
		if !strings.Contains(body, want) {
			t.Errorf("diff lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "secret-wandb") {
		t.Error("diff renders a secret")
	}
}

func TestBrowser_screenshotsOfEveryPage(t *testing.T) {
	if os.Getenv("HOIST_SCREENSHOTS") == "" {
		t.Skip("SKIP: set HOIST_SCREENSHOTS=<dir> to capture every page")
	}
	tab := browser(t)
	e := newLiveEnv(t)
	steps := []chromedp.Action[chromedp.Void]{e.login(e.seeded.Tokens.Admin)}
	for _, p := range []struct{ name, path, wait string }{
		{"overview", "/", "[data-testid=sync-panel]"},
		{"runs", "/runs", "[data-testid=runs-table]"},
		{"run-hello", "/runs/hello", "[data-testid=logs]"},
		{"run-serve", "/runs/serve", "[data-testid=traffic-chart]"},
		{"fleets", "/fleets", "[data-testid=instances-table]"},
		{"volumes", "/volumes", "[data-testid=volumes-table]"},
		{"gateways", "/gateways", "[data-testid=gateways-table]"},
		{"offers-grouped", "/offers?gpu=A100&group_by=gpu,backend", "[data-testid=offer-groups]"},
		{"history", "/history", "[data-testid=revisions-table]"},
		{"secrets", "/secrets", "[data-testid=secrets-table]"},
		{"revision-bad", "/history/" + e.seeded.RevBad, "[data-testid=revision-errors]"},
	} {
		steps = append(steps, chromedp.Navigate(e.url+p.path), chromedp.WaitVisible(css(p.wait)), shoot(p.name))
	}
	if err := chromedp.Do(tab, steps...); err != nil {
		t.Fatal(err)
	}
}

func TestBrowser_pagesReadWithJavaScriptOff(t *testing.T) {
	tab := browser(t)
	e := newLiveEnv(t)
	if _, err := chromedp.Call(tab, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tab,
		e.login(e.seeded.Tokens.Admin),
		chromedp.Navigate(e.url+"/runs/hello"),
		chromedp.WaitVisible(css(`[data-testid=logs]`)),
		chromedp.WaitVisible(css(`[data-testid=timeline]`)),
		shoot("run-hello-nojs"),
	); err != nil {
		t.Fatal(err)
	}
	if logs := text(t, tab, `[data-testid=logs]`); !strings.Contains(logs, "hello line 3") {
		t.Errorf("logs without JavaScript: %q", logs)
	}
	// A service's dashboard is drawn by the server: replicas and chart.
	if err := chromedp.Do(tab,
		chromedp.Navigate(e.url+"/runs/serve"),
		chromedp.WaitVisible(css(`[data-testid=traffic-chart]`)),
	); err != nil {
		t.Fatal(err)
	}
	if rows := text(t, tab, `[data-testid=replicas-table] tbody`); !strings.Contains(rows, "serve-0-0") || !strings.Contains(rows, "/health") {
		t.Errorf("replicas without JavaScript: %q", rows)
	}
	// Forms work without JavaScript: filter runs by status.
	if err := chromedp.Do(tab,
		chromedp.Navigate(e.url+"/runs"),
		chromedp.SetValue(css(`[data-testid=filter-status]`), "failed"),
		chromedp.Submit(css(`[data-testid=runs-filter]`)),
		chromedp.WaitReady(css(`[data-testid=filter-status] option[value=failed][selected]`)),
	); err != nil {
		t.Fatal(err)
	}
	if rows := text(t, tab, `[data-testid=runs-table] tbody`); strings.Contains(rows, "hello") {
		t.Errorf("filter ignored: %q", rows)
	}
}

func TestBrowser_secretsPageSetsAndDeletesWithoutShowingValues(t *testing.T) {
	tab := browser(t)
	e := newLiveEnv(t)
	const value = "browser-secret-value-4f1e"
	if err := chromedp.Do(tab,
		e.login(e.seeded.Tokens.Admin),
		chromedp.Navigate(e.url+"/secrets"),
		chromedp.WaitVisible(css(`[data-testid=secret-form]`)),
		chromedp.SendKeys(css(`[data-testid=secret-form] input[name=name]`), "BROWSER_KEY"),
		chromedp.SendKeys(css(`[data-testid=secret-form] textarea[name=value]`), value),
		chromedp.Submit(css(`[data-testid=secret-form]`)),
		chromedp.WaitVisible(css(`#secret-BROWSER_KEY`)),
		shoot("secrets-set"),
	); err != nil {
		t.Fatal(err)
	}
	if got, err := e.st.GetSecret(t.Context(), "", "BROWSER_KEY"); err != nil || string(got) != value {
		t.Fatalf("stored %q, %v", got, err)
	}
	if html := eval[string](t, tab, `document.documentElement.outerHTML`); strings.Contains(html, value) {
		t.Error("the page shows the value after setting it")
	}
	if err := chromedp.Do(tab,
		chromedp.Click(css(`#secret-BROWSER_KEY button`)),
		// The message of the set is still shown until the delete's
		// redirect lands: wait for the row to go, then for the new message.
		chromedp.WaitNotPresent(css(`#secret-BROWSER_KEY`)),
		chromedp.WaitVisible(css(`[data-testid=secrets-msg]`)),
	); err != nil {
		t.Fatalf("the deleted secret is still listed: %v", err)
	}
	if msg := text(t, tab, `[data-testid=secrets-msg]`); !strings.Contains(msg, "BROWSER_KEY deleted") {
		t.Errorf("message after delete = %q", msg)
	}
}

// TestMeasure_liveLogLatency measures the time from a line stored to the
// line shown in the browser (goal ≤ 200 ms), with NotifyLogs wired and with
// the followers' polling alone. It runs only with HOIST_MEASURE=1.
func TestMeasure_liveLogLatency(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") != "1" {
		t.Skip("SKIP: set HOIST_MEASURE=1 to measure live log latency")
	}
	tab := browser(t)
	for _, notify := range []bool{true, false} {
		e := newLiveEnv(t) // fresh: a server that was ever notified polls slowly
		if err := chromedp.Do(tab, e.login(e.seeded.Tokens.Viewer), chromedp.Navigate(e.url+"/runs/train"),
			poll(`document.querySelector("[data-testid=logs]").getAttribute("data-job-status") === "running"`, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		var ds []time.Duration
		for i := range 40 {
			line := fmt.Sprintf("measure %v %d", notify, i)
			start := time.Now()
			if _, err := e.st.AppendLogs(context.Background(), e.seeded.TrainJob, []store.LogLine{{Stream: "stdout", Data: []byte(line + "\n")}}); err != nil {
				t.Fatal(err)
			}
			if notify {
				e.srv.NotifyLogs()
			}
			js := fmt.Sprintf(`document.querySelector("[data-testid=logs]").textContent.includes(%q)`, line)
			if err := chromedp.Do(tab, poll(js, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(start))
			time.Sleep(time.Duration(i%7) * 13 * time.Millisecond) // decorrelate from the poll tick
		}
		slices.Sort(ds)
		t.Logf("notify=%v: n=%d median %v p90 %v max %v", notify, len(ds), ds[len(ds)/2], ds[len(ds)*9/10], ds[len(ds)-1])
		if p90 := ds[len(ds)*9/10]; p90 > 200*time.Millisecond {
			t.Errorf("notify=%v: p90 %v exceeds 200 ms", notify, p90)
		}
	}
}
