package storeview_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"hoist/store"
	"hoist/web"
	"hoist/web/storeview"
)

func TestView_secretsRoundTripWithoutValuesInLists(t *testing.T) {
	key := make([]byte, 32)
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "hoist.db"), store.Options{Now: func() time.Time { return now }, SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v := storeview.New(st, "")
	ctx := t.Context()
	if err := v.SetSecret(ctx, "HF_TOKEN", []byte("hf_value"), "admin"); err != nil {
		t.Fatal(err)
	}
	list, err := v.ListSecrets(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "HF_TOKEN" || !list[0].UpdatedAt.Equal(now) {
		t.Fatalf("ListSecrets = %+v, %v", list, err)
	}
	if got, err := v.GetSecret(ctx, "HF_TOKEN"); err != nil || string(got) != "hf_value" {
		t.Errorf("GetSecret = %q, %v", got, err)
	}
	if _, err := v.GetSecret(ctx, "NOPE"); !errors.Is(err, web.ErrNotFound) {
		t.Errorf("GetSecret(missing) = %v, want ErrNotFound", err)
	}
	if err := v.DeleteSecret(ctx, "NOPE", "admin"); !errors.Is(err, web.ErrNotFound) {
		t.Errorf("DeleteSecret(missing) = %v, want ErrNotFound", err)
	}
	if err := v.DeleteSecret(ctx, "HF_TOKEN", "admin"); err != nil {
		t.Fatal(err)
	}
	if list, _ := v.ListSecrets(ctx); len(list) != 0 {
		t.Errorf("after delete: %+v", list)
	}
}
