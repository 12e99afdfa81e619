package main

import (
	"github.com/spf13/cobra"

	"hoist/schema"
)

func newSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the embedded CUE schema for specs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(schema.SchemaSource())
			return err
		},
	}
}
