package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"hoist/store/blob"
)

// Artifact store kinds of the config's `artifacts.store`.
const (
	artifactStoreFS = "fs"
	artifactStoreS3 = "s3"
)

// artifactsConfig is the `artifacts:` section: where jobs' artifact files
// are kept and for how long.
//
//	artifacts:
//	  store: fs            # fs (default) or s3
//	  path: /srv/artifacts # fs only; default <data-dir>/artifacts
//	  retention: 30d       # a Go duration or days; default: keep
//	  s3: {bucket: …, region: …, endpoint: …, prefix: …, path_style: true,
//	       access_key_id: …, secret_access_key: …}
type artifactsConfig struct {
	// Store is fs or s3 ("" is fs).
	Store string `yaml:"store"`
	// Path is the fs store's directory.
	Path string `yaml:"path"`
	// Retention is how long artifacts are kept after their run finished:
	// a Go duration (720h) or whole days (30d); "" or 0 keeps them.
	Retention string `yaml:"retention"`
	// S3 is the s3 store's bucket and credentials.
	S3 *blob.S3Config `yaml:"s3"`
}

// check validates the section, naming the field at fault.
func (c artifactsConfig) check() error {
	switch c.Store {
	case "", artifactStoreFS:
		if c.S3 != nil {
			return errors.New("artifacts.s3: only with store: s3")
		}
	case artifactStoreS3:
		if c.Path != "" {
			return errors.New("artifacts.path: only with store: fs (the s3 store's place is artifacts.s3)")
		}
		if c.S3 == nil || c.S3.Bucket == "" {
			return errors.New("artifacts.s3.bucket: required with store: s3")
		}
		if (c.S3.AccessKeyID == "") != (c.S3.SecretAccessKey == "") {
			return errors.New("artifacts.s3: access_key_id and secret_access_key go together")
		}
	default:
		return fmt.Errorf("artifacts.store: must be fs or s3, not %q", c.Store)
	}
	if _, err := parseRetention(c.Retention); err != nil {
		return fmt.Errorf("artifacts.retention: %w", err)
	}
	return nil
}

// parseRetention reads a retention: a Go duration (720h, 90m) or a number
// of days (30d); "" is zero (keep).
func parseRetention(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, fmt.Errorf("%q is neither a duration (720h) nor days (30d)", v)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, fmt.Errorf("%q is neither a duration (720h) nor days (30d)", v)
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", v)
	}
	return d, nil
}

// openArtifacts opens the configured artifact store (a checked config) and
// returns it with its retention: by default the file system under
// <data-dir>/artifacts.
func openArtifacts(ctx context.Context, c artifactsConfig, dataDir string) (blob.Store, time.Duration, error) {
	retention, err := parseRetention(c.Retention)
	if err != nil {
		return nil, 0, fmt.Errorf("artifacts.retention: %w", err)
	}
	if c.Store == artifactStoreS3 {
		st, err := blob.OpenS3(ctx, *c.S3)
		if err != nil {
			return nil, 0, fmt.Errorf("artifacts.s3: %w", err)
		}
		return st, retention, nil
	}
	dir := c.Path
	if dir == "" {
		dir = filepath.Join(dataDir, "artifacts")
	}
	st, err := blob.OpenFS(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("artifacts.path: %w", err)
	}
	return st, retention, nil
}
