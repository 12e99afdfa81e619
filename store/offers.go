package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

type offerRow struct {
	bun.BaseModel `bun:"table:offers_cache"`

	Key       string          `bun:"key,pk"`
	Data      json.RawMessage `bun:"data,type:text,notnull"`
	ExpiresAt time.Time       `bun:"expires_at,notnull"`
	CreatedAt time.Time       `bun:"created_at,notnull"`
}

// PutOffers caches data (JSON) under key for ttl, replacing any entry.
func (s *Store) PutOffers(ctx context.Context, key string, data json.RawMessage, ttl time.Duration) error {
	now := s.Now()
	row := offerRow{Key: key, Data: data, ExpiresAt: now.Add(ttl), CreatedAt: now}
	_, err := s.db.NewInsert().Model(&row).On("CONFLICT (key) DO UPDATE").
		Set("data = EXCLUDED.data").Set("expires_at = EXCLUDED.expires_at").Set("created_at = EXCLUDED.created_at").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("put offers %s: %w", key, err)
	}
	return nil
}

// GetOffers returns the cached data under key; ok is false when there is no
// entry or it has expired.
func (s *Store) GetOffers(ctx context.Context, key string) (data json.RawMessage, ok bool, err error) {
	var row offerRow
	err = s.db.NewSelect().Model(&row).Where("key = ? AND expires_at > ?", key, s.Now()).Scan(ctx)
	if err != nil {
		if isNotFound(notFound(err, "")) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("get offers %s: %w", key, err)
	}
	return row.Data, true, nil
}

// PruneOffers deletes expired cache entries and returns how many.
func (s *Store) PruneOffers(ctx context.Context) (int64, error) {
	res, err := s.db.NewDelete().Model((*offerRow)(nil)).Where("expires_at <= ?", s.Now()).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("prune offers: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
