// Command hoist is the GitOps daemon and CLI for GPU workloads: it validates
// dstack-style specs committed to Git, plans them against what is provisioned,
// and reconciles through backend drivers and its own agents.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"hoist/web/client"
)

// exitError carries a process exit code out of a command without printing
// anything more than the command already printed.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "hoist",
		Short:         "Run GPU workloads from dstack-style specs committed to Git",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Subcommands: one line each.
	root.AddCommand(newAgentCmd())
	root.AddCommand(newServeCmd())
	root.AddCommand(newPlanCmd())
	root.AddCommand(newOffersCmd())
	root.AddCommand(newValidateCmd())
	root.AddCommand(newSchemaCmd())
	root.AddCommand(newSecretCmd())
	root.AddCommand(newUserCmd(), newProjectCmd(), newTokenCmd())
	root.AddCommand(newPsCmd())
	root.AddCommand(newLogsCmd())
	root.AddCommand(newStopCmd())
	root.AddCommand(newEventsCmd())
	root.AddCommand(newAuditCmd())
	root.AddCommand(newMetricsCmd())
	root.AddCommand(newLoginCmd())
	root.AddCommand(newAttachCmd())
	root.AddCommand(newSSHCmd())
	root.AddCommand(newSSHProxyCmd())
	root.AddCommand(newGatewayCmd())
	root.AddCommand(newArtifactsCmd())
	return root
}

// exitCode is the process's exit code for a command's error: 3 when the
// server said the named object does not exist (scripts test for it), else 1.
func exitCode(err error) int {
	if errors.Is(err, client.ErrNotFound) {
		return 3
	}
	return 1
}

func main() {
	ran, err := agentByName(os.Args)
	if !ran {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = newRootCmd().ExecuteContext(ctx)
		stop()
	}
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "hoist:", err)
		os.Exit(exitCode(err))
	}
}
