package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"hoist/web/client"
)

// listing describes a `list` command of objects of type T kept by the
// server: how to fetch them and how each prints as a row of the table.
type listing[T any] struct {
	// cmd is the command without RunE (Use, Short, Long, Args).
	cmd *cobra.Command
	// what prefixes errors, e.g. "token".
	what string
	// fetch reads the objects from the server.
	fetch func(ctx context.Context, c *client.Client, args []string) ([]T, error)
	// header is the table's tab-separated header.
	header string
	// row is an object's tab-separated cells.
	row func(T) string
}

// listCmd completes l.cmd: its client flags and -o, and a RunE printing the
// objects as JSON (-o json) or as a table.
func listCmd[T any](l listing[T]) *cobra.Command {
	var o clientOptions
	var output string
	check := outputFlag(l.cmd, &output)
	o.addFlags(l.cmd.Flags())
	l.cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd, check)
		if err != nil {
			return err
		}
		items, err := l.fetch(cmd.Context(), c, args)
		if err != nil {
			return fmt.Errorf("%s: %w", l.what, err)
		}
		if items == nil {
			items = []T{}
		}
		if output == "json" {
			return writeJSON(cmd.OutOrStdout(), items)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, l.header)
		for _, it := range items {
			fmt.Fprintln(tw, l.row(it))
		}
		return tw.Flush()
	}
	return l.cmd
}
