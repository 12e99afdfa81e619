package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3Config is where an S3 store keeps its objects: the server config's
// `artifacts: {s3: …}` block.
type S3Config struct {
	// Endpoint is the URL of an S3-compatible service (MinIO, Ceph, R2, …);
	// empty for Amazon S3 itself.
	Endpoint string `yaml:"endpoint"`
	// Region is the bucket's region; empty takes the SDK's default
	// (AWS_REGION, the shared config), else us-east-1.
	Region string `yaml:"region"`
	// Bucket is the bucket's name; it must exist.
	Bucket string `yaml:"bucket"`
	// Prefix is prepended to every key (a "/" is added when it lacks one),
	// so that hoist can share a bucket.
	Prefix string `yaml:"prefix"`
	// AccessKeyID and SecretAccessKey are static credentials; both empty
	// takes the SDK's default credential chain (environment, shared
	// files, instance role).
	AccessKeyID     string `yaml:"access_key_id"`
	SecretAccessKey string `yaml:"secret_access_key"`
	// PathStyle addresses the bucket as endpoint/bucket/key rather than
	// bucket.endpoint/key, which most S3-compatible services need.
	PathStyle bool `yaml:"path_style"`
}

// deleteBatch is the most keys one DeleteObjects call takes
// (https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html).
const deleteBatch = 1000

// failTimeout bounds the AbortMultipartUpload after a failed Put, which
// runs on a context of its own so that a cancelled Put still cleans up.
const failTimeout = 30 * time.Second

// S3 is a Store in an S3 bucket: each key is an object named Prefix + key.
// Put streams through the SDK's transfer manager (one PutObject for small
// bodies, a multipart upload, aborted on failure, for large or
// unknown-size ones), so a failed Put leaves no object.
type S3 struct {
	client   *s3.Client
	uploader *transfermanager.Client
	bucket   string
	prefix   string
}

// OpenS3 connects to cfg's bucket and checks that it exists (HeadBucket).
func OpenS3(ctx context.Context, cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("artifacts.s3.bucket: empty")
	}
	if (cfg.AccessKeyID == "") != (cfg.SecretAccessKey == "") {
		return nil, errors.New("artifacts.s3: access_key_id and secret_access_key must be given together")
	}
	prefix := cfg.Prefix
	if prefix != "" {
		prefix = strings.TrimSuffix(prefix, "/")
		if !validKey(prefix) {
			return nil, fmt.Errorf("artifacts.s3.prefix: %q is not a clean relative slash path", cfg.Prefix)
		}
		prefix += "/"
	}
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("artifacts.s3: load AWS config: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.UsePathStyle = cfg.PathStyle
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
			// S3-compatible services do not all know the CRC checksums the
			// SDK sends on every upload since service/s3 v1.73.0 (its
			// CHANGELOG, 2025-01-15); send and check them only where an
			// operation requires them, as before.
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})
	where := cfg.Endpoint
	if where == "" {
		where = "Amazon S3 (" + awsCfg.Region + ")"
	}
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(cfg.Bucket)}); err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("artifacts.s3: bucket %q does not exist at %s: %w", cfg.Bucket, where, err)
		}
		return nil, fmt.Errorf("artifacts.s3: bucket %q at %s: %w", cfg.Bucket, where, err)
	}
	uploader := transfermanager.New(client, func(o *transfermanager.Options) {
		o.FailTimeout = failTimeout
		o.RequestChecksumCalculation = client.Options().RequestChecksumCalculation
	})
	return &S3{client: client, uploader: uploader, bucket: cfg.Bucket, prefix: prefix}, nil
}

// object maps a key to its object name, refusing keys that are not clean
// relative paths.
func (s *S3) object(key string) (string, error) {
	if !validKey(key) {
		return "", fmt.Errorf("invalid blob key %q", key)
	}
	return s.prefix + key, nil
}

// Put uploads r under key. size, when known, sets the upload's part size;
// bodies of unknown size go in parts of the transfer manager's default
// size (8 MiB, so at most 80 GiB with S3's 10,000 parts).
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	in := &transfermanager.UploadObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(name),
		// The checked reader also hides r's io.Seeker, which the transfer
		// manager would otherwise use to size (and rewind) the body.
		Body: newCheckedReader(ctx, r, size),
	}
	if size > 0 {
		in.ContentLength = aws.Int64(size)
	}
	if _, err := s.uploader.UploadObject(ctx, in); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// Get opens the key's object.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	name, err := s.object(key)
	if err != nil {
		return nil, 0, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(name)})
	if isNotFound(err) {
		return nil, 0, fmt.Errorf("get %s: %w (%w)", key, ErrNotFound, err)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("get %s: %w", key, err)
	}
	return out.Body, aws.ToInt64(out.ContentLength), nil
}

// List pages through ListObjectsV2 under Prefix + prefix.
func (s *S3) List(ctx context.Context, prefix string) ([]Object, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	var out []Object
	err := s.each(ctx, prefix, func(objs []types.Object) error {
		for _, o := range objs {
			out = append(out, Object{
				Key:     strings.TrimPrefix(aws.ToString(o.Key), s.prefix),
				Size:    aws.ToInt64(o.Size),
				ModTime: aws.ToTime(o.LastModified).UTC(),
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	// S3 lists in UTF-8 binary order already; sorting keeps the promise
	// for services that do not.
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// DeletePrefix deletes the prefix's objects a listed page (at most 1,000
// keys, DeleteObjects' limit) at a time.
func (s *S3) DeletePrefix(ctx context.Context, prefix string) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	err := s.each(ctx, prefix, func(objs []types.Object) error {
		for len(objs) > 0 {
			n := min(len(objs), deleteBatch)
			ids := make([]types.ObjectIdentifier, n)
			for i, o := range objs[:n] {
				ids[i] = types.ObjectIdentifier{Key: o.Key}
			}
			objs = objs[n:]
			out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
				Bucket: aws.String(s.bucket),
				Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
			})
			if err != nil {
				return err
			}
			if len(out.Errors) > 0 {
				e := out.Errors[0]
				return fmt.Errorf("%d of %d objects not deleted, first %s: %s %s",
					len(out.Errors), n, aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete %s: %w", prefix, err)
	}
	return nil
}

// each calls fn with every page of the objects under Prefix + prefix.
func (s *S3) each(ctx context.Context, prefix string, fn func([]types.Object) error) error {
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket:  aws.String(s.bucket),
		Prefix:  aws.String(s.prefix + prefix),
		MaxKeys: aws.Int32(deleteBatch),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		if err := fn(page.Contents); err != nil {
			return err
		}
	}
	return nil
}

// checkPrefix refuses a prefix whose directory part (up to its last "/")
// is not a clean relative path, as FS.List does.
func checkPrefix(prefix string) error {
	if strings.HasPrefix(prefix, "/") {
		return fmt.Errorf("invalid blob prefix %q", prefix)
	}
	if i := strings.LastIndex(prefix, "/"); i > 0 && !validKey(prefix[:i]) {
		return fmt.Errorf("invalid blob prefix %q", prefix)
	}
	return nil
}

// isNotFound reports whether err is S3's answer for a missing object (or,
// to HeadBucket, bucket): NoSuchKey, or a 404 without a code (HEAD answers
// have no body to carry one). A missing bucket under GetObject
// (NoSuchBucket) is a misconfiguration, not a missing object.
func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return true
		case "NoSuchBucket":
			return false
		}
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}
