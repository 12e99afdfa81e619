// Package support is hoist's one table of what its runtime does with each
// field of the dstack language, and the check that enforces it.
//
// The schema (hoist/schema) accepts every configuration dstack accepts;
// this package decides, field by field, whether hoist's runtime honours
// it. Every field of every kind (task, service, dev-environment, fleet,
// volume, gateway), down to the nested fields whose support differs, has
// one Row in Table:
//
//   - Honoured: the runtime does what dstack documents; the row names the
//     test that proves it.
//   - Partial: honoured (with its test) for some values; the others are
//     refused.
//   - Refused: any use is an error "not supported yet by hoist: …" at the
//     field's file:line:col, and the revision is rejected whole.
//   - Advisory: the field has no effect on what hoist runs; using it gives
//     a warning.
//
// Check is a reconciler.Check: `hoist serve` applies it to every revision,
// `hoist validate` and `hoist plan` apply it to local specs, so all three
// report the same errors. Warnings returns the advisory warnings. Markdown
// renders the table for the README (`hoist schema --support`); a test
// keeps the README's copy current, and another walks the embedded CUE
// schema so that a field added to it without a row fails.
//
// As features land, their rows move from Refused to Honoured.
//
// Who may import it: cmd/hoist (and tests). Of hoist's packages it imports
// only hoist/schema; it is pure (no I/O).
package support
