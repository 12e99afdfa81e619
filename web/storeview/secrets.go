package storeview

import (
	"context"
	"fmt"
	"slices"

	"hoist/store"
	"hoist/web"
)

var _ web.Secrets = (*View)(nil)

// ListSecrets returns the project's secrets by name, without values.
func (v *View) ListSecrets(ctx context.Context) ([]web.Secret, error) {
	list, err := v.st.ListSecrets(ctx, v.project)
	if err != nil {
		return nil, err
	}
	out := make([]web.Secret, len(list))
	for i, s := range list {
		out[i] = web.Secret{Name: s.Name, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	}
	return out, nil
}

// GetSecret decrypts the named secret; web.ErrNotFound when absent.
func (v *View) GetSecret(ctx context.Context, name string) ([]byte, error) {
	b, err := v.st.GetSecret(ctx, v.project, name)
	return b, mapErr(err)
}

// SetSecret stores the named secret, encrypted, and records a "set" event
// naming it and by (never the value).
func (v *View) SetSecret(ctx context.Context, name string, value []byte, by string) error {
	if err := v.st.SetSecret(ctx, v.project, name, value); err != nil {
		return err
	}
	return v.secretEvent(ctx, name, "set", by)
}

// DeleteSecret removes the named secret and records a "deleted" event
// naming it and by; web.ErrNotFound when absent.
func (v *View) DeleteSecret(ctx context.Context, name, by string) error {
	names, err := v.st.ListSecretNames(ctx, v.project)
	if err != nil {
		return err
	}
	if !slices.Contains(names, name) {
		return fmt.Errorf("%w: secret %s", web.ErrNotFound, name)
	}
	if err := v.st.DeleteSecret(ctx, v.project, name); err != nil {
		return err
	}
	return v.secretEvent(ctx, name, "deleted", by)
}

// secretEvent records that by did what (set, deleted) to the named secret.
// The change itself is done; a failure to record it is still an error, so
// the caller learns that the audit trail misses it.
func (v *View) secretEvent(ctx context.Context, name, what, by string) error {
	if by == "" {
		by = "unknown"
	}
	_, err := v.st.AddEvent(ctx, store.Event{Project: v.project, ObjectKind: "secret", ObjectName: name, Type: what,
		Message: fmt.Sprintf("secret %s %s by %s", name, what, by)})
	if err != nil {
		return fmt.Errorf("secret %s %s, but its event was not recorded: %w", name, what, err)
	}
	return nil
}
