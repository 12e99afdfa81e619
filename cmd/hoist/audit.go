package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"hoist/reconciler"
	"hoist/web"
)

// The web's audit route (GET /api/v1/audit) asks the project's reconciler.
var _ web.Auditor = controller{}

// Audit computes the project's audit report (web.Auditor).
func (c controller) Audit(ctx context.Context) (web.Audit, error) {
	return auditView(c.ctrl.Audit(ctx)), nil
}

// auditView is rep as the API shows it.
func auditView(rep reconciler.AuditReport) web.Audit {
	out := web.Audit{Project: rep.Project, CheckedAt: web.AuditTime(rep.CheckedAt), GraceSeconds: int64(rep.Grace / time.Second),
		Leaked: []web.AuditLeaked{}, Lost: []web.AuditLost{}, Duplicated: []web.AuditDuplicate{}, Errors: []web.AuditError{}}
	for _, l := range rep.Leaked {
		var age int64
		if !l.CreatedAt.IsZero() {
			age = int64(rep.CheckedAt.Sub(l.CreatedAt) / time.Second)
		}
		out.Leaked = append(out.Leaked, web.AuditLeaked{Backend: l.Backend, Kind: l.Kind, ID: l.ID, ProviderID: l.ProviderID,
			CreatedAt: web.AuditTime(l.CreatedAt), AgeSeconds: age, ReapAt: web.AuditTime(l.ReapAt)})
	}
	for _, l := range rep.Lost {
		out.Lost = append(out.Lost, web.AuditLost{Backend: l.Backend, Kind: l.Kind, ID: l.ID, Name: l.Name, ProviderID: l.ProviderID,
			Status: l.Status, Owner: l.Owner, Action: l.Action})
	}
	for _, d := range rep.Duplicated {
		out.Duplicated = append(out.Duplicated, web.AuditDuplicate{Kind: d.Kind, Run: d.Run, Job: d.Job, IDs: d.IDs, Message: d.Message})
	}
	for _, e := range rep.Errors {
		out.Errors = append(out.Errors, web.AuditError{Backend: e.Backend, Kind: e.Kind, Error: e.Error})
	}
	return out
}

func newAuditCmd() *cobra.Command {
	var o clientOptions
	var output string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Compare what the providers hold with what the server knows: leaked, lost, duplicated",
		Long: `Ask the server to audit the project: for every backend, the resources that
carry this installation's and project's ownership tags are compared with
what the server's store holds, both ways, and printed in sections, each with
its count:

  leaked      resources with our tags that the store does not know; the
              periodic leak audit (serve --leak-audit-interval) deletes
              them at REAP AT, their creation plus the grace
  lost        instances and volumes the store holds as existing that the
              provider no longer has, and what the server does about them
  duplicated  what must exist once and exists more often: a job with two
              live submissions, an instance or volume twice at a provider
  errors      backends that could not be listed (their resources are not
              counted as none)

It needs the project's manager role (or a global admin). With -o json the
report is the API's JSON (GET /api/v1/audit).

` + clientHelp + `

Exit codes: 0 nothing leaked, lost or duplicated (errors alone do not fail
it), 1 something leaked, lost or duplicated, or an error (including
unauthorized and forbidden); CI can gate on it.`,
		Args: cobra.NoArgs,
	}
	check := outputFlag(cmd, &output)
	o.addProjectFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := o.prepare(cmd, check); err != nil {
			return err
		}
		c, err := o.client()
		if err != nil {
			return err
		}
		a, err := c.Audit(cmd.Context())
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		w := cmd.OutOrStdout()
		if output == "json" {
			err = writeJSON(w, a)
		} else {
			err = printAudit(w, a)
		}
		if err != nil {
			return err
		}
		if !a.Clean() {
			return &exitError{code: 1}
		}
		return nil
	}
	return cmd
}

// printAudit writes a's sections as tables, each with its count.
func printAudit(w io.Writer, a web.Audit) error {
	fmt.Fprintf(w, "project %s checked at %s (leak grace %s)\n", a.Project, a.CheckedAt, time.Duration(a.GraceSeconds)*time.Second)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nleaked: %d\n", len(a.Leaked))
	if len(a.Leaked) > 0 {
		fmt.Fprintln(tw, "BACKEND\tKIND\tID\tPROVIDER ID\tAGE\tREAP AT")
		for _, l := range a.Leaked {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.Backend, l.Kind, l.ID, l.ProviderID, time.Duration(l.AgeSeconds)*time.Second, l.ReapAt)
		}
	}
	fmt.Fprintf(tw, "\nlost: %d\n", len(a.Lost))
	if len(a.Lost) > 0 {
		fmt.Fprintln(tw, "BACKEND\tKIND\tNAME\tID\tSTATUS\tOWNER\tACTION")
		for _, l := range a.Lost {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Backend, l.Kind, l.Name, l.ID, l.Status, l.Owner, l.Action)
		}
	}
	fmt.Fprintf(tw, "\nduplicated: %d\n", len(a.Duplicated))
	if len(a.Duplicated) > 0 {
		fmt.Fprintln(tw, "KIND\tRUN\tJOB\tIDS\tMESSAGE")
		for _, d := range a.Duplicated {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", d.Kind, d.Run, d.Job, d.IDs, d.Message)
		}
	}
	fmt.Fprintf(tw, "\nerrors: %d\n", len(a.Errors))
	if len(a.Errors) > 0 {
		fmt.Fprintln(tw, "BACKEND\tKIND\tERROR")
		for _, e := range a.Errors {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Backend, e.Kind, e.Error)
		}
	}
	return tw.Flush()
}
