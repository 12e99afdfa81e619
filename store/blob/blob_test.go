package blob_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"

	"hoist/e2e/testenv"
	"hoist/store/blob"
)

// s3Config returns the config of the test S3 service (testenv.S3) with a
// fresh Prefix of the test's own.
func s3Config(t testing.TB) blob.S3Config {
	t.Helper()
	srv := testenv.S3(t)
	cfg := blob.S3Config{
		Endpoint:        srv.Endpoint,
		Region:          "us-east-1",
		Bucket:          srv.Bucket,
		AccessKeyID:     srv.AccessKey,
		SecretAccessKey: srv.SecretKey,
		PathStyle:       true,
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	cfg.Prefix = "test-" + hex.EncodeToString(b[:])
	return cfg
}

// stores are the implementations every behaviour test runs against.
var stores = []struct {
	name string
	open func(t testing.TB) blob.Store
}{
	{"FS", func(t testing.TB) blob.Store {
		s, err := blob.OpenFS(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"S3", func(t testing.TB) blob.Store {
		cfg := s3Config(t)
		s, err := blob.OpenS3(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.DeletePrefix(context.Background(), ""); err != nil {
				t.Errorf("clean up prefix %s: %v", cfg.Prefix, err)
			}
		})
		return s
	}},
}

// forEachStore runs test against a fresh store of every implementation.
func forEachStore(t *testing.T, test func(t *testing.T, s blob.Store)) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) { test(t, st.open(t)) })
	}
}

func put(t testing.TB, s blob.Store, key, body string) {
	t.Helper()
	if err := s.Put(t.Context(), key, strings.NewReader(body), int64(len(body))); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func get(t testing.TB, s blob.Store, key string) string {
	t.Helper()
	rc, size, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	if int64(len(b)) != size {
		t.Errorf("get %s: size %d, read %d bytes", key, size, len(b))
	}
	return string(b)
}

func keys(t testing.TB, s blob.Store, prefix string) []string {
	t.Helper()
	objs, err := s.List(t.Context(), prefix)
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	out := []string{}
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

func TestStore_putGetRoundTrips(t *testing.T) {
	forEachStore(t, func(t *testing.T, s blob.Store) {
		key := blob.Key("main", "run-1", 0, "data/input.txt")
		put(t, s, key, "hello\n")
		if got := get(t, s, key); got != "hello\n" {
			t.Errorf("got %q", got)
		}
		objs, err := s.List(t.Context(), key)
		if err != nil || len(objs) != 1 || objs[0].Key != key || objs[0].Size != 6 || objs[0].ModTime.IsZero() {
			t.Errorf("list = %+v, %v", objs, err)
		}
	})
}

func TestStore_putEmptyObject(t *testing.T) {
	forEachStore(t, func(t *testing.T, s blob.Store) {
		put(t, s, "a/empty", "")
		if got := get(t, s, "a/empty"); got != "" {
			t.Errorf("got %q", got)
		}
	})
}

func TestStore_putReplaces(t *testing.T) {
	forEachStore(t, func(t *testing.T, s blob.Store) {
		put(t, s, "a/b", "first, longer")
		put(t, s, "a/b", "second")
		if got := get(t, s, "a/b"); got != "second" {
			t.Errorf("got %q", got)
		}
		if got := keys(t, s, "a/"); len(got) != 1 {
			t.Errorf("list = %v", got)
		}
	})
}

func TestStore_getMissingIsErrNotFound(t *testing.T) {
	forEachStore(t, func(t *testing.T, s blob.Store) {
		put(t, s, "a/b", "x")
		for _, key := range []string{"a/c", "a/b/c", "nothing/here"} {
			_, _, err := s.Get(t.Context(), key)
			if !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("get %s: %v, want ErrNotFound", key, err)
			}
		}
	})
}

func TestStore_listIsSortedAndByPrefix(t *testing.T) {
	forEachStore(t, func(t *testing.T, s blob.Store) {
		for _, k := range []string{"a/10/x", "a/1/z", "a/1/b/c", "a/1/a", "a/2", "b/1/a"} {
			put(t, s, k, k)
		}
		for _, c := range []struct {
			prefix string
			want   []string
		}{
			{"a/1/", []string{"a/1/a", "a/1/b/c", "a/1/z"}},
			{"a/1", []string{"a/1/a", "a/1/b/c", "a/1/z", "a/10/x"}},
			{"a/", []string{"a/1/a", "a/1/b/c", "a/1/z", "a/10/x", "a/2"}},
			{"", []string{"a/1/a", "a/1/b/c", "a/1/z", "a/10/x", "a/2", "b/1/a"}},
			{"c/", []string{}},
		} {
			if got := keys(t, s, c.prefix); strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("list %q = %v, want %v", c.prefix, got, c.want)
			}
		}
	})
}

func TestStore_deletePrefixLeavesOthers(t *testing.T) {
	forEachStore(t, func(t *testing.T, s blob.Store) {
		for _, k := range []string{"a/1/x", "a/1/y/z", "a/10/x", "b/1/x"} {
			put(t, s, k, k)
		}
		if err := s.DeletePrefix(t.Context(), "a/1/"); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(keys(t, s, ""), " "); got != "a/10/x b/1/x" {
			t.Errorf("left %q", got)
		}
		if err := s.DeletePrefix(t.Context(), "nothing/"); err != nil {
			t.Errorf("delete of an empty prefix: %v", err)
		}
	})
}

func TestStore_deletePrefixOfManyObjects(t *testing.T) {
	forEachStore(t, func(t *testing.T, s blob.Store) {
		// More than one DeleteObjects batch (1,000 keys) and list page.
		const n = 1100
		var g errgroup.Group
		g.SetLimit(16)
		for i := range n {
			g.Go(func() error {
				key := blob.Key("main", "run-1", 0, fmt.Sprintf("f%04d", i))
				return s.Put(t.Context(), key, strings.NewReader("x"), 1)
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		put(t, s, blob.Key("main", "run-2", 0, "kept"), "x")
		if got := len(keys(t, s, blob.RunPrefix("main", "run-1"))); got != n {
			t.Fatalf("listed %d, want %d", got, n)
		}
		if err := s.DeletePrefix(t.Context(), blob.RunPrefix("main", "run-1")); err != nil {
			t.Fatal(err)
		}
		if got := keys(t, s, ""); len(got) != 1 {
			t.Errorf("left %d objects: %.5v", len(got), got)
		}
	})
}

func TestStore_refusesInvalidKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, s blob.Store) {
		for _, key := range []string{"", "/a", "a/", "a//b", "a/./b", "a/../b", "..", "."} {
			if err := s.Put(t.Context(), key, strings.NewReader("x"), 1); err == nil {
				t.Errorf("put %q: no error", key)
			}
			if _, _, err := s.Get(t.Context(), key); err == nil || errors.Is(err, blob.ErrNotFound) {
				t.Errorf("get %q: %v, want an invalid-key error", key, err)
			}
		}
		if _, err := s.List(t.Context(), "../a/"); err == nil {
			t.Error("list ../a/: no error")
		}
		if err := s.DeletePrefix(t.Context(), "a/../../"); err == nil {
			t.Error("delete a/../../: no error")
		}
		if got := keys(t, s, ""); len(got) != 0 {
			t.Errorf("stored %v", got)
		}
	})
}

// failingReader yields n pseudo-random bytes and then fails.
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("reader broke")
	}
	m := min(len(p), f.n)
	f.n -= m
	return m, nil
}

func TestStore_failedPutLeavesNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		size int
	}{
		{"small", 1000},
		// Past the S3 transfer manager's multipart threshold (16 MiB), so
		// that the multipart upload is aborted.
		{"multipart", 20 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, s blob.Store) {
				put(t, s, "a/kept", "old")
				err := s.Put(t.Context(), "a/new", &failingReader{c.size}, -1)
				if err == nil {
					t.Fatal("put succeeded")
				}
				err = s.Put(t.Context(), "a/kept", &failingReader{c.size}, -1)
				if err == nil {
					t.Fatal("put succeeded")
				}
				if got := strings.Join(keys(t, s, ""), " "); got != "a/kept" {
					t.Errorf("stored %q", got)
				}
				if got := get(t, s, "a/kept"); got != "old" {
					t.Errorf("a failed replace left %q", got)
				}
			})
		})
	}
}

func TestStore_putOfAnotherLengthThanSizeFails(t *testing.T) {
	for _, c := range []struct {
		name       string
		body, size int
	}{
		{"shorter", 3, 10},
		{"longer", 10, 3},
		{"shorter, multipart", 20 << 20, 30 << 20},
		{"longer, multipart", 20 << 20, 17 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, s blob.Store) {
				body := io.LimitReader(randomReader{mrand.NewChaCha8([32]byte{2})}, int64(c.body))
				if err := s.Put(t.Context(), "a/b", body, int64(c.size)); err == nil {
					t.Error("put succeeded")
				}
				if got := keys(t, s, ""); len(got) != 0 {
					t.Errorf("stored %v", got)
				}
			})
		})
	}
}

func TestStore_putRespectsCancelledContext(t *testing.T) {
	forEachStore(t, func(t *testing.T, s blob.Store) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := s.Put(ctx, "a/b", strings.NewReader("x"), 1); !errors.Is(err, context.Canceled) {
			t.Errorf("put: %v, want context.Canceled", err)
		}
		if got := keys(t, s, ""); len(got) != 0 {
			t.Errorf("stored %v", got)
		}
	})
}

// randomReader is an unsized stream of pseudo-random bytes: no Len, Seek
// or WriterTo for an implementation to size it by.
type randomReader struct{ r *mrand.ChaCha8 }

func (r randomReader) Read(p []byte) (int, error) { return r.r.Read(p) }

func TestStore_largeObjectOfUnknownSize(t *testing.T) {
	forEachStore(t, func(t *testing.T, s blob.Store) {
		const size = 21<<20 + 123
		src := io.LimitReader(randomReader{mrand.NewChaCha8([32]byte{1})}, size)
		want := sha256.New()
		if err := s.Put(t.Context(), "big/object", io.TeeReader(src, want), -1); err != nil {
			t.Fatal(err)
		}
		rc, n, err := s.Get(t.Context(), "big/object")
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		got := sha256.New()
		read, err := io.Copy(got, rc)
		if err != nil {
			t.Fatal(err)
		}
		if n != size || read != size {
			t.Errorf("size %d, read %d, want %d", n, read, size)
		}
		if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
			t.Error("content differs")
		}
	})
}

func TestOpenS3_prefixIsPrependedAndStripped(t *testing.T) {
	cfg := s3Config(t)
	s, err := blob.OpenS3(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.DeletePrefix(context.Background(), "") })
	put(t, s, "a/b", "x")
	if got := keys(t, s, ""); strings.Join(got, " ") != "a/b" {
		t.Errorf("list = %v", got)
	}
	bare := cfg
	bare.Prefix = ""
	all, err := blob.OpenS3(t.Context(), bare)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(t, all, cfg.Prefix+"/"); strings.Join(got, " ") != cfg.Prefix+"/a/b" {
		t.Errorf("bucket holds %v, want %s/a/b", got, cfg.Prefix)
	}
}

func TestOpenS3_missingBucketIsNamed(t *testing.T) {
	cfg := s3Config(t)
	cfg.Bucket = "no-such-bucket-" + strings.ToLower(cfg.Prefix)
	_, err := blob.OpenS3(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), cfg.Bucket) || !strings.Contains(err.Error(), cfg.Endpoint) {
		t.Errorf("err = %v, want one naming %s and %s", err, cfg.Bucket, cfg.Endpoint)
	}
}

func TestOpenS3_refusesBadConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  blob.S3Config
	}{
		{"no bucket", blob.S3Config{Endpoint: "http://127.0.0.1:1"}},
		{"half the keys", blob.S3Config{Bucket: "b", AccessKeyID: "id"}},
		{"unclean prefix", blob.S3Config{Bucket: "b", Prefix: "a/../b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := blob.OpenS3(t.Context(), c.cfg); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestS3_failedMultipartPutIsAborted(t *testing.T) {
	cfg := s3Config(t)
	s, err := blob.OpenS3(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), "a/b", &failingReader{40 << 20}, -1); err == nil {
		t.Fatal("put succeeded")
	}
	client := s3.New(s3.Options{
		BaseEndpoint: aws.String(cfg.Endpoint),
		Region:       cfg.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, ""),
		UsePathStyle: true,
	})
	out, err := client.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{
		Bucket: aws.String(cfg.Bucket), Prefix: aws.String(cfg.Prefix + "/"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Uploads) != 0 {
		t.Errorf("%d multipart uploads left open", len(out.Uploads))
	}
}

// repeatReader yields n bytes cycling through buf, with no Len or Seek.
type repeatReader struct {
	buf []byte
	off int
	n   int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	m := copy(p, r.buf[r.off:])
	r.off = (r.off + m) % len(r.buf)
	r.n -= int64(m)
	return m, nil
}

// benchSize is the object size of the throughput benchmarks.
const benchSize = 256 << 20

// BenchmarkStore_put measures Put of a 256 MiB body of unknown size.
func BenchmarkStore_put(b *testing.B) {
	buf := make([]byte, 1<<20)
	_, _ = rand.Read(buf)
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			b.SetBytes(benchSize)
			for b.Loop() {
				if err := s.Put(b.Context(), "bench/object", &repeatReader{buf: buf, n: benchSize}, -1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStore_get measures reading a 256 MiB object through Get.
func BenchmarkStore_get(b *testing.B) {
	buf := make([]byte, 1<<20)
	_, _ = rand.Read(buf)
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			if err := s.Put(b.Context(), "bench/object", &repeatReader{buf: buf, n: benchSize}, benchSize); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchSize)
			for b.Loop() {
				rc, _, err := s.Get(b.Context(), "bench/object")
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, rc)
				_ = rc.Close()
				if err != nil || n != benchSize {
					b.Fatalf("read %d bytes: %v", n, err)
				}
			}
		})
	}
}
