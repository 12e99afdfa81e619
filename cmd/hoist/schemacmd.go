package main

import (
	"io"

	"github.com/spf13/cobra"

	"hoist/reconciler/support"
	"hoist/schema"
)

func newSchemaCmd() *cobra.Command {
	var supportTable bool
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Print the embedded CUE schema for specs, or what hoist supports of it",
		Long: "Print the embedded CUE schema for specs. With --support, print instead the table of\n" +
			"what hoist's runtime does with each field (honoured, partial, refused or advisory) as\n" +
			"Markdown: the table README.md carries.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if supportTable {
				_, err := io.WriteString(cmd.OutOrStdout(), support.Markdown())
				return err
			}
			_, err := cmd.OutOrStdout().Write(schema.SchemaSource())
			return err
		},
	}
	cmd.Flags().BoolVar(&supportTable, "support", false, "print the support table (Markdown) instead of the schema")
	return cmd
}
