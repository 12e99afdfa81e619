package testenv

import (
	"os"
	"testing"
)

// The environment variables minio.sh sets for a running MinIO.
const (
	// S3EndpointEnv holds the server's URL (http://127.0.0.1:<port>).
	S3EndpointEnv = "HOIST_TEST_S3_ENDPOINT"
	// S3BucketEnv holds the name of the bucket minio.sh created.
	S3BucketEnv = "HOIST_TEST_S3_BUCKET"
	// S3AccessKeyEnv and S3SecretKeyEnv hold the server's credentials.
	S3AccessKeyEnv = "HOIST_TEST_S3_ACCESS_KEY"
	S3SecretKeyEnv = "HOIST_TEST_S3_SECRET_KEY"
)

// S3Service is a running S3-compatible server and a bucket on it.
type S3Service struct {
	// Endpoint is the server's URL; it wants path-style addressing.
	Endpoint string
	// Bucket exists and may hold other tests' objects: use a key prefix of
	// the test's own.
	Bucket string
	// AccessKey and SecretKey are its static credentials.
	AccessKey, SecretKey string
}

// S3 returns the S3-compatible server named by HOIST_TEST_S3_*. Outside CI
// an unset HOIST_TEST_S3_ENDPOINT skips the test with a loud message; under
// CI=true it fails it. Start the server with
// `eval "$(e2e/testenv/minio.sh start)"`.
func S3(t testing.TB) S3Service {
	t.Helper()
	s := S3Service{
		Endpoint:  os.Getenv(S3EndpointEnv),
		Bucket:    os.Getenv(S3BucketEnv),
		AccessKey: os.Getenv(S3AccessKeyEnv),
		SecretKey: os.Getenv(S3SecretKeyEnv),
	}
	if s.Endpoint == "" || s.Bucket == "" {
		Missing(t, `s3: %s/%s are unset; start MinIO with: eval "$(e2e/testenv/minio.sh start)"`, S3EndpointEnv, S3BucketEnv)
	}
	return s
}
