package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"hoist/backends"
)

func (b *Backend) records(ctx context.Context) ([]record, error) {
	all, err := b.cfg.Records.ListBackendRecords(ctx, b.cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("local backend: load instance records: %w", err)
	}
	out := make([]record, 0, len(all))
	for id, raw := range all {
		var r record
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("local backend: instance record %s: %w", id, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func (b *Backend) getRecord(ctx context.Context, id string) (record, bool, error) {
	raw, ok, err := b.cfg.Records.GetBackendRecord(ctx, b.cfg.Name, id)
	if err != nil || !ok {
		return record{}, false, err
	}
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		return record{}, false, fmt.Errorf("local backend: instance record %s: %w", id, err)
	}
	return r, true, nil
}

func (b *Backend) putRecord(ctx context.Context, r record) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := b.cfg.Records.PutBackendRecord(context.WithoutCancel(ctx), b.cfg.Name, r.ID, raw); err != nil {
		return fmt.Errorf("local backend: record instance %s: %w", r.ID, err)
	}
	return nil
}

func (b *Backend) deleteRecord(ctx context.Context, id string) error {
	return b.cfg.Records.DeleteBackendRecord(context.WithoutCancel(ctx), b.cfg.Name, id)
}

// othersInstance is an instance another server serves, as this one sees
// it: running (its host is up as far as this server knows), reached only
// through that server.
func (b *Backend) othersInstance(r record) backends.Instance {
	return backends.Instance{
		ID: r.ID, Backend: b.cfg.Name, Region: Region, Hostname: "127.0.0.1", InternalIP: "127.0.0.1",
		Status: backends.StatusRunning, Runtime: backends.RuntimeShim, Offer: r.Offer,
		Message: "served by hoist server " + r.Server, Arch: goarch(),
		Tags: backends.CopyTags(r.Tags), CreatedAt: r.CreatedAt,
	}
}

// migrateFiles moves the records an older hoist kept in
// <dir>/<id>/instance.json into the shared records, as this server's.
func (b *Backend) migrateFiles(ctx context.Context, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("local backend: %w", err)
	}
	for _, e := range ents {
		path := filepath.Join(dir, e.Name(), "instance.json")
		raw, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // none, or a Create that died before recording
		}
		if err != nil {
			return fmt.Errorf("local backend: %w", err)
		}
		var r record
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("local backend: instance record %s: %w", path, err)
		}
		r.Server = b.server
		if err := b.putRecord(ctx, r); err != nil {
			return err
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("local backend: remove migrated record: %w", err)
		}
		b.log.Info("record_migrated", "instance", r.ID)
	}
	return nil
}
