package storeview

import (
	"context"
	"fmt"
	"slices"

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

// SetSecret stores the named secret, encrypted.
func (v *View) SetSecret(ctx context.Context, name string, value []byte) error {
	return v.st.SetSecret(ctx, v.project, name, value)
}

// DeleteSecret removes the named secret; web.ErrNotFound when absent.
func (v *View) DeleteSecret(ctx context.Context, name string) error {
	names, err := v.st.ListSecretNames(ctx, v.project)
	if err != nil {
		return err
	}
	if !slices.Contains(names, name) {
		return fmt.Errorf("%w: secret %s", web.ErrNotFound, name)
	}
	return v.st.DeleteSecret(ctx, v.project, name)
}
