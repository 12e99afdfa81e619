package store

import (
	"context"
	"encoding/json"
	"reflect"
	"time"

	"github.com/uptrace/bun"
)

var (
	timeType    = reflect.TypeFor[time.Time]()
	rawJSONType = reflect.TypeFor[json.RawMessage]()
)

// normalize puts every time.Time field of the struct v points to into UTC and
// turns empty JSON columns (SQL NULL) into nil, so rows read from either
// database compare equal.
func normalize(v any) {
	normalizeValue(reflect.ValueOf(v).Elem())
}

func normalizeValue(rv reflect.Value) {
	for i := 0; i < rv.NumField(); i++ {
		f := rv.Field(i)
		if !f.CanSet() {
			continue
		}
		switch {
		case f.Type() == timeType:
			t := f.Interface().(time.Time)
			if t.IsZero() {
				f.Set(reflect.ValueOf(time.Time{}))
			} else {
				f.Set(reflect.ValueOf(t.UTC()))
			}
		case f.Type() == rawJSONType:
			if f.Len() == 0 && !f.IsNil() {
				f.Set(reflect.Zero(rawJSONType))
			}
		case f.Kind() == reflect.Struct && f.Type() != reflect.TypeFor[bun.BaseModel]():
			normalizeValue(f)
		}
	}
}

var (
	_ bun.AfterScanRowHook = (*Run)(nil)
	_ bun.AfterScanRowHook = (*Job)(nil)
)

// AfterScanRow normalizes times to UTC.
func (p *Project) AfterScanRow(context.Context) error { normalize(p); return nil }

// AfterScanRow normalizes times to UTC.
func (u *User) AfterScanRow(context.Context) error { normalize(u); return nil }

// AfterScanRow normalizes times to UTC.
func (t *APIToken) AfterScanRow(context.Context) error { normalize(t); return nil }

// AfterScanRow normalizes times to UTC.
func (r *Revision) AfterScanRow(context.Context) error { normalize(r); return nil }

// AfterScanRow normalizes times to UTC.
func (s *SyncState) AfterScanRow(context.Context) error { normalize(s); return nil }

// AfterScanRow normalizes times to UTC and empty JSON to nil.
func (r *Resource) AfterScanRow(context.Context) error { normalize(r); return nil }

// AfterScanRow normalizes times to UTC and empty JSON to nil.
func (r *Run) AfterScanRow(context.Context) error { normalize(r); return nil }

// AfterScanRow normalizes times to UTC and empty JSON to nil.
func (j *Job) AfterScanRow(context.Context) error { normalize(j); return nil }

// AfterScanRow normalizes times to UTC and empty JSON to nil.
func (i *Instance) AfterScanRow(context.Context) error { normalize(i); return nil }

// AfterScanRow normalizes times to UTC and empty JSON to nil.
func (f *Fleet) AfterScanRow(context.Context) error { normalize(f); return nil }

// AfterScanRow normalizes times to UTC and empty JSON to nil.
func (v *Volume) AfterScanRow(context.Context) error { normalize(v); return nil }

// AfterScanRow normalizes times to UTC and empty JSON to nil.
func (a *VolumeAttachment) AfterScanRow(context.Context) error { normalize(a); return nil }

// AfterScanRow normalizes times to UTC and empty JSON to nil.
func (g *Gateway) AfterScanRow(context.Context) error { normalize(g); return nil }

// AfterScanRow normalizes times to UTC.
func (e *Event) AfterScanRow(context.Context) error { normalize(e); return nil }
