package web

import (
	"context"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds hoist's Prometheus instruments. The web feeds the HTTP and
// webhook ones itself; the reconciler feeds the rest through the Observe and
// Set methods (cmd/hoist hands it Server.Metrics()).
type Metrics struct {
	reg *prometheus.Registry

	reconcileDuration *prometheus.HistogramVec
	reconcileTotal    *prometheus.CounterVec
	queueDepth        *prometheus.GaugeVec
	queueScheduled    *prometheus.GaugeVec
	syncRequests      prometheus.Counter
	syncsTotal        *prometheus.CounterVec
	webhooks          *prometheus.CounterVec
	httpDuration      *prometheus.HistogramVec
	leaksReaped       *prometheus.CounterVec
	sshConns          prometheus.Gauge
	jobDuration       *prometheus.HistogramVec
	budgetBlocked     *prometheus.CounterVec
	backoff           *prometheus.HistogramVec
	backingOff        *prometheus.GaugeVec
	backendErrors     *prometheus.CounterVec
	audit             *prometheus.GaugeVec
}

// NewMetrics registers hoist's instruments (and the Go and process
// collectors) on a fresh registry.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		reg: reg,
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hoist_reconcile_duration_seconds",
			Help:    "Time one reconcile of an object took, by kind and result.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12),
		}, []string{"kind", "result"}),
		reconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hoist_reconcile_total",
			Help: "Reconciles by kind and result (success, error, stalled, wait).",
		}, []string{"kind", "result"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hoist_queue_depth",
			Help: "Objects of a kind waiting for a reconcile worker now (the backlog).",
		}, []string{"kind"}),
		queueScheduled: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hoist_queue_scheduled",
			Help: "Objects of a kind whose next reconcile waits for a delay (scheduled re-checks and retries).",
		}, []string{"kind"}),
		syncRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hoist_sync_requests_total",
			Help: "Sync requests received (API, dashboard and webhooks); bursts coalesce into fewer syncs.",
		}),
		syncsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hoist_syncs_total",
			Help: "Syncs of the revision pipeline, by result (success, error).",
		}, []string{"result"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hoist_webhook_deliveries_total",
			Help: "Webhook deliveries by provider, event and result.",
		}, []string{"provider", "event", "result"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hoist_http_request_duration_seconds",
			Help:    "HTTP request latency by method, route pattern and status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"method", "route", "code"}),
		leaksReaped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hoist_leaked_resources_deleted_total",
			Help: "Instances, volumes and placement groups tagged as this installation's that the store did not know, deleted by the leak audit, by backend and kind.",
		}, []string{"backend", "kind"}),
		sshConns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hoist_ssh_connections",
			Help: "SSH connections into jobs open through this server (hoist attach, hoist ssh).",
		}),
		jobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hoist_job_duration_seconds",
			Help:    "Time finished jobs ran, from their start to their final status, by backend and final status (jobs that never started are not observed).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		}, []string{"backend", "status"}),
		audit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hoist_audit_findings",
			Help: "What the last periodic audit of a project found, by kind: leaked (tagged resources the store does not know), lost (resources the store holds that the provider does not have), duplicated (what must exist once and exists twice), errors (backends it could not list).",
		}, []string{"project", "kind"}),
		budgetBlocked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hoist_budget_blocked_total",
			Help: "Times a job or fleet (kind) started waiting because the instance it needs would take its project past its budget (once per wait, not per retry).",
		}, []string{"project", "kind"}),
		backoff: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hoist_reconcile_backoff_seconds",
			Help:    "Back-off before the retry of an object whose reconcile failed with a transient error, by kind (its count is the number of retries).",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 10),
		}, []string{"kind"}),
		backingOff: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hoist_queue_backing_off",
			Help: "Objects of a reconcile queue whose last reconcile failed (waiting out a back-off, or stalled), by kind.",
		}, []string{"kind"}),
		backendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hoist_backend_errors_total",
			Help: "Failed calls of the reconciler to a backend (instances, volumes, leak audit), by backend and kind (transient, wait, stalled, no_capacity, not_found, unreachable, ...).",
		}, []string{"backend", "kind"}),
	}
	reg.MustRegister(m.reconcileDuration, m.reconcileTotal, m.queueDepth, m.queueScheduled, m.syncRequests, m.syncsTotal, m.webhooks, m.httpDuration, m.leaksReaped,
		m.sshConns, m.jobDuration, m.budgetBlocked, m.backoff, m.backingOff, m.backendErrors, m.audit)
	return m
}

// Registry returns the registry /metrics serves, so other packages can
// register their own collectors on it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// LeakReaped counts one leaked resource of kind (instance, volume,
// placement_group) the leak audit deleted on backend.
func (m *Metrics) LeakReaped(backend, kind string) {
	m.leaksReaped.WithLabelValues(backend, kind).Inc()
}

// Audited sets the counts of the last audit of project: its leaked, lost
// and duplicated findings and the backends it could not ask.
func (m *Metrics) Audited(project string, leaked, lost, duplicated, errors int) {
	for kind, n := range map[string]int{"leaked": leaked, "lost": lost, "duplicated": duplicated, "errors": errors} {
		m.audit.WithLabelValues(project, kind).Set(float64(n))
	}
}

// BudgetBlocked counts a job or fleet (kind) of project that started
// waiting for its project's budget.
func (m *Metrics) BudgetBlocked(project, kind string) {
	m.budgetBlocked.WithLabelValues(project, kind).Inc()
}

// ObserveJobFinished records that a job on backend reached its final
// status after running for d (from its start to its end).
func (m *Metrics) ObserveJobFinished(backend, status string, d time.Duration) {
	if backend == "" {
		backend = noBackend
	}
	m.jobDuration.WithLabelValues(backend, status).Observe(d.Seconds())
}

// ObserveReconcile records one reconcile of kind that ended with result
// (success, error, stalled or wait) after d.
func (m *Metrics) ObserveReconcile(kind, result string, d time.Duration) {
	m.reconcileDuration.WithLabelValues(kind, result).Observe(d.Seconds())
	m.reconcileTotal.WithLabelValues(kind, result).Inc()
}

// ObserveSync counts one sync of the revision pipeline that ended with
// result (the reconciler's: synced, invalid, held, unchanged or error) as
// success or error.
func (m *Metrics) ObserveSync(result string) {
	if result != "error" {
		result = "success"
	}
	m.syncsTotal.WithLabelValues(result).Inc()
}

// ObserveRetry records that an object of kind failed and is retried after
// the back-off d.
func (m *Metrics) ObserveRetry(kind string, d time.Duration) {
	m.backoff.WithLabelValues(kind).Observe(d.Seconds())
}

// SetBackingOff records how many objects of kind's queue failed since
// their last success.
func (m *Metrics) SetBackingOff(kind string, n int) {
	m.backingOff.WithLabelValues(kind).Set(float64(n))
}

// BackendFailed counts one failed call to backend, of kind (a
// backends.Reason).
func (m *Metrics) BackendFailed(backend, kind string) {
	m.backendErrors.WithLabelValues(backend, kind).Inc()
}

// SetQueueDepth records how many objects of kind wait for a reconcile
// worker now and how many wait for a delay.
func (m *Metrics) SetQueueDepth(kind string, ready, delayed int) {
	m.queueDepth.WithLabelValues(kind).Set(float64(ready))
	m.queueScheduled.WithLabelValues(kind).Set(float64(delayed))
}

func (m *Metrics) observeWebhook(provider, event, result string) {
	m.webhooks.WithLabelValues(provider, event, result).Inc()
}

func (m *Metrics) observeHTTP(method, route string, code int, d time.Duration) {
	m.httpDuration.WithLabelValues(method, route, strconv.Itoa(code)).Observe(d.Seconds())
}

// runsCollector reports hoist_runs{project,status} from each project's
// store at scrape time.
type runsCollector struct {
	s    *Server
	desc *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (rc runsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- rc.desc }

// Collect implements prometheus.Collector.
func (rc runsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, p := range rc.s.projectList() {
		counts := map[string]int{}
		for _, st := range runStatuses {
			counts[st] = 0
		}
		n, err := rc.s.countRuns(ctx, p)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(rc.desc, err)
			continue
		}
		for st, k := range n {
			counts[st] = k
		}
		for st, n := range counts {
			ch <- prometheus.MustNewConstMetric(rc.desc, prometheus.GaugeValue, float64(n), p.name, st)
		}
	}
}

func (s *Server) metricsHandler() echo.HandlerFunc {
	h := promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return func(c *echo.Context) error {
		h.ServeHTTP(c.Response(), c.Request())
		return nil
	}
}

// Metrics returns the server's instruments for the reconciler to feed.
func (s *Server) Metrics() *Metrics { return s.metrics }
