package web

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// jobStatuses is dstack's job vocabulary (JobStatus in
// src/dstack/_internal/core/models/runs.py), in lifecycle order: the
// statuses hoist_jobs reports, zero when no job has them.
var jobStatuses = []string{"submitted", "provisioning", "pulling", "running", "terminating", "terminated", "aborted", "failed", "done"}

// instanceStatuses is dstack's instance vocabulary (InstanceStatus in
// src/dstack/_internal/core/models/instances.py) as hoist uses it: the
// statuses hoist_instances reports, zero when no instance has them.
var instanceStatuses = []string{"pending", "provisioning", "idle", "busy", "terminating", "terminated"}

// noBackend labels jobs never placed on an instance, which have no
// backend (an empty label value would read as no label at all).
const noBackend = "none"

// accountingCollector reports the money and health series from the store
// at scrape time: each live instance's price, the project's month-to-date
// spend, and instances and jobs by status and backend.
type accountingCollector struct {
	s *Server

	price, spend, instances, jobs       *prometheus.Desc
	spendTotal, budgetHour, budgetMonth *prometheus.Desc
}

func newAccountingCollector(s *Server) accountingCollector {
	return accountingCollector{
		s: s,
		price: prometheus.NewDesc("hoist_instance_price_dollars_per_hour",
			"Hourly price in USD of each instance that is not terminated.",
			[]string{"project", "instance", "fleet", "backend", "region", "spot"}, nil),
		spend: prometheus.NewDesc("hoist_project_spend_month_to_date_dollars",
			"USD spent since the start of the current UTC month: each instance's price per hour times the hours it was billed in the month (from its provisioning to its termination), computed from the store at scrape time; it falls back to zero when a month starts.",
			[]string{"project"}, nil),
		spendTotal: prometheus.NewDesc("hoist_project_spend_dollars_total",
			"USD spent by the project since its first instance: each instance's price per hour times the hours it was billed (from its provisioning to its termination), computed from the store at scrape time.",
			[]string{"project"}, nil),
		budgetHour: prometheus.NewDesc("hoist_project_budget_dollars_per_hour",
			"The project's budget in USD per hour (the server config's projects[].budget.max_per_hour); absent when it has none.",
			[]string{"project"}, nil),
		budgetMonth: prometheus.NewDesc("hoist_project_budget_dollars_per_month",
			"The project's budget in USD per UTC month (the server config's projects[].budget.max_per_month); absent when it has none.",
			[]string{"project"}, nil),
		instances: prometheus.NewDesc("hoist_instances",
			"Instances by project, status and backend (terminated ones until they are deleted).",
			[]string{"project", "status", "backend"}, nil),
		jobs: prometheus.NewDesc("hoist_jobs",
			"Job submissions of the current runs by project, status and backend (\"none\" for submissions never placed).",
			[]string{"project", "status", "backend"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (ac accountingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ac.price
	ch <- ac.spend
	ch <- ac.spendTotal
	ch <- ac.budgetHour
	ch <- ac.budgetMonth
	ch <- ac.instances
	ch <- ac.jobs
}

// Collect implements prometheus.Collector. A series whose source failed
// is reported as an invalid metric, so that the scrape names the error.
func (ac accountingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, p := range ac.s.projectList() {
		if p.Inventory != nil {
			ac.collectInstances(ctx, p.name, p.Inventory, ch)
		}
		if acc, ok := p.Store.(Accounting); ok {
			ac.collectSpend(ctx, acc, ch)
			ac.collectJobs(ctx, p.name, acc, ch)
		}
	}
}

func (ac accountingCollector) collectInstances(ctx context.Context, proj string, inv Inventory, ch chan<- prometheus.Metric) {
	is, err := inv.ListInstances(ctx, "")
	if err != nil {
		ac.s.log.Warn("metrics scrape: list instances failed", "error", err)
		ch <- prometheus.NewInvalidMetric(ac.instances, err)
		return
	}
	counts := map[[2]string]int{}
	for _, i := range is {
		if _, ok := counts[[2]string{instanceStatuses[0], i.Backend}]; !ok {
			for _, st := range instanceStatuses {
				counts[[2]string{st, i.Backend}] = 0
			}
		}
		counts[[2]string{i.Status, i.Backend}]++
		if i.Status != "terminated" {
			ch <- prometheus.MustNewConstMetric(ac.price, prometheus.GaugeValue, i.Price,
				proj, i.Name, i.Fleet, i.Backend, i.Region, strconv.FormatBool(i.Spot))
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(ac.instances, prometheus.GaugeValue, float64(n), proj, k[0], k[1])
	}
}

func (ac accountingCollector) collectSpend(ctx context.Context, acc Accounting, ch chan<- prometheus.Metric) {
	now := ac.s.now().UTC()
	start := monthStart(now)
	is, err := acc.BilledInstances(ctx, start)
	if err != nil {
		ac.s.log.Warn("metrics scrape: list billed instances failed", "error", err)
		ch <- prometheus.NewInvalidMetric(ac.spend, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(ac.spend, prometheus.GaugeValue, spendSince(is, start, now), acc.Project())
	if b := ac.s.budgetOf(acc.Project()); b.MaxPerHour > 0 {
		ch <- prometheus.MustNewConstMetric(ac.budgetHour, prometheus.GaugeValue, b.MaxPerHour, acc.Project())
	}
	if b := ac.s.budgetOf(acc.Project()); b.MaxPerMonth > 0 {
		ch <- prometheus.MustNewConstMetric(ac.budgetMonth, prometheus.GaugeValue, b.MaxPerMonth, acc.Project())
	}
	all, err := acc.BilledInstances(ctx, time.Time{})
	if err != nil {
		ac.s.log.Warn("metrics scrape: list billed instances failed", "error", err)
		ch <- prometheus.NewInvalidMetric(ac.spendTotal, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(ac.spendTotal, prometheus.CounterValue, spendSince(all, time.Time{}, now), acc.Project())
}

func (ac accountingCollector) collectJobs(ctx context.Context, proj string, acc Accounting, ch chan<- prometheus.Metric) {
	cs, err := acc.CountJobs(ctx)
	if err != nil {
		ac.s.log.Warn("metrics scrape: count jobs failed", "error", err)
		ch <- prometheus.NewInvalidMetric(ac.jobs, err)
		return
	}
	counts := map[[2]string]int{}
	for _, c := range cs {
		be := c.Backend
		if be == "" {
			be = noBackend
		}
		if _, ok := counts[[2]string{jobStatuses[0], be}]; !ok {
			for _, st := range jobStatuses {
				counts[[2]string{st, be}] = 0
			}
		}
		counts[[2]string{c.Status, be}] += c.N
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(ac.jobs, prometheus.GaugeValue, float64(n), proj, k[0], k[1])
	}
}

// monthStart is midnight UTC of the first day of t's month.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// spendSince is the USD the instances cost between start and now: each
// one's price per hour times the hours of its lifetime that fall in
// [start, now].
func spendSince(is []BilledInstance, start, now time.Time) float64 {
	var total float64
	for _, i := range is {
		to := now
		if i.To != nil {
			to = minTime(*i.To, now)
		}
		from := maxTime(i.From, start)
		if to.After(from) {
			total += i.Price * to.Sub(from).Hours()
		}
	}
	return total
}
