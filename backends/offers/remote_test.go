package offers

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// bucket is a fake of gpuhunt's published layout:
// /<provider>/version and /<provider>/<version>/catalog.zip.
type bucket struct {
	mu       sync.Mutex
	versions map[string]string
	objects  map[string][]byte // path → body
	fail     map[string]int    // path → status to answer instead
	hits     map[string]int
}

func newBucket() *bucket {
	return &bucket{versions: map[string]string{}, objects: map[string][]byte{}, fail: map[string]int{}, hits: map[string]int{}}
}

func (b *bucket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hits[r.URL.Path]++
	if code := b.fail[r.URL.Path]; code != 0 {
		http.Error(w, "injected failure", code)
		return
	}
	body, ok := b.objects[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(body)
}

// publish uploads a catalog zip for provider at version and then, as
// gpuhunt's publish script does, points the version object at it.
func (b *bucket) publish(t *testing.T, provider, version string, rows ...string) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	f, err := zw.Create(provider + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, strings.Join(CSVColumns, ",")+"\n"+strings.Join(rows, "\n")+"\n")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objects["/v3/"+provider+"/"+version+"/catalog.zip"] = buf.Bytes()
	b.objects["/v3/"+provider+"/version"] = []byte(version + "\n")
}

func (b *bucket) setFail(path string, code int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if code == 0 {
		delete(b.fail, path)
	} else {
		b.fail[path] = code
	}
}

func (b *bucket) hitCount(path string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hits[path]
}

func prices(c *Catalog, backend string) []float64 {
	var out []float64
	for _, o := range c.Query(Query{Backends: []string{backend}, SpotPolicy: SpotPolicyAuto}) {
		out = append(out, o.Price)
	}
	return out
}

func TestRemote_refreshVersionBumpAndFailures(t *testing.T) {
	b := newBucket()
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	b.publish(t, "lambdalabs", "20261121-1",
		`gpu_1x_a10,us-east-1,0.75,30,200.0,1,A10,24.0,False,,nvidia,,x86,{}`)
	b.publish(t, "aws", "20261121-1",
		`g5.xlarge,us-east-1,1.006,4,16.0,1,A10G,24.0,False,,nvidia,,x86,{}`)

	base := mustEmbedded(t)
	r, err := NewRemote(RemoteConfig{
		URL: srv.URL + "/v3", Providers: []string{"lambdalabs", "aws"}, Base: base,
		Client: srv.Client(), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Catalog() != base {
		t.Fatal("before the first refresh the catalog is not the base")
	}

	// First refresh: both providers replace their embedded rows; the base's
	// other providers stay.
	if err := r.Refresh(t.Context()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	c := r.Catalog()
	if got := prices(c, "lambda"); len(got) != 1 || got[0] != 0.75 {
		t.Fatalf("lambda prices after refresh = %v, want [0.75]", got)
	}
	if got := len(prices(c, "verda")); got != 28+27 {
		t.Errorf("base verda rows = %d, want 55", got)
	}
	if c.SnapshotDate() != "2026-11-21" {
		t.Errorf("SnapshotDate = %q", c.SnapshotDate())
	}

	// Unchanged versions: no zip downloads, same catalog.
	zipPath := "/v3/lambdalabs/20261121-1/catalog.zip"
	if err := r.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := b.hitCount(zipPath); n != 1 {
		t.Errorf("zip downloaded %d times for an unchanged version, want 1", n)
	}
	if r.Catalog() != c {
		t.Error("catalog rebuilt although nothing changed")
	}

	// Version bump for lambdalabs; aws's version endpoint fails: lambda
	// moves to the new version, aws keeps its last good copy.
	b.publish(t, "lambdalabs", "20261122-2",
		`gpu_1x_a10,us-east-1,0.8,30,200.0,1,A10,24.0,False,,nvidia,,x86,{}`,
		`gpu_1x_h100_pcie,us-east-1,2.49,26,200.0,1,H100,80.0,False,,nvidia,,x86,{}`)
	b.setFail("/v3/aws/version", http.StatusServiceUnavailable)
	err = r.Refresh(t.Context())
	if err == nil || !strings.Contains(err.Error(), "aws") || strings.Contains(err.Error(), "lambdalabs") {
		t.Fatalf("Refresh error = %v, want one naming aws only", err)
	}
	c = r.Catalog()
	if got := prices(c, "lambda"); len(got) != 2 || got[0] != 0.8 {
		t.Errorf("lambda prices after bump = %v, want [0.8 2.49]", got)
	}
	if got := prices(c, "aws"); len(got) != 1 || got[0] != 1.006 {
		t.Errorf("aws prices after failed refresh = %v, want the last good [1.006]", got)
	}
	if v := versions(r); v["lambdalabs"] != "20261122-2" || v["aws"] != "20261121-1" {
		t.Errorf("Versions = %v", v)
	}
	if c.SnapshotDate() != "2026-11-21" {
		t.Errorf("mixed catalog SnapshotDate = %q, want the oldest, 2026-11-21", c.SnapshotDate())
	}

	// A bumped catalog failing integrity checks (a row with a zero price
	// and GPU fields on a CPU row) does not replace the good one.
	b.setFail("/v3/aws/version", 0)
	b.publish(t, "aws", "20261122-3",
		`g5.xlarge,us-east-1,0.0,4,16.0,1,A10G,24.0,False,,nvidia,,x86,{}`,
		`m5.large,us-east-1,0.096,2,8.0,0,A10G,,False,,,,x86,{}`)
	err = r.Refresh(t.Context())
	if !errors.Is(err, ErrIntegrity) {
		t.Fatalf("Refresh error = %v, want an integrity error", err)
	}
	if got := prices(r.Catalog(), "aws"); len(got) != 1 || got[0] != 1.006 {
		t.Errorf("aws prices after a bad catalog = %v, want [1.006]", got)
	}

	// A missing zip (version written first, zip absent) also keeps the old copy.
	b.mu.Lock()
	b.objects["/v3/aws/version"] = []byte("20261122-4")
	b.mu.Unlock()
	if err := r.Refresh(t.Context()); err == nil {
		t.Fatal("Refresh with a missing zip succeeded")
	}
	if got := prices(r.Catalog(), "aws"); len(got) != 1 || got[0] != 1.006 {
		t.Errorf("aws prices after a missing zip = %v, want [1.006]", got)
	}
}

func TestRemote_runCallsOnUpdate(t *testing.T) {
	b := newBucket()
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	b.publish(t, "verda", "20261122-1", `1H100.80S.22V,FIN-01,2.19,22,80.0,1,H100,80.0,False,,nvidia,,x86,{}`)
	r, err := NewRemote(RemoteConfig{URL: srv.URL + "/v3", Providers: []string{"verda"}, Client: srv.Client(),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	updated := make(chan *Catalog, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, 0, func(c *Catalog) {
			updated <- c
			cancel()
		})
	}()
	c := <-updated
	<-done
	if c.Len() != 1 || c.SnapshotDate() != "2026-11-22" {
		t.Errorf("Run delivered a catalog of %d rows dated %q", c.Len(), c.SnapshotDate())
	}
}

func TestNewRemote_rejectsNonHTTPURL(t *testing.T) {
	for _, u := range []string{"", "file:///tmp", "s3://bucket/v3", "http://"} {
		if _, err := NewRemote(RemoteConfig{URL: u}); err == nil {
			t.Errorf("NewRemote(%q) succeeded", u)
		}
	}
}

func TestOpen_catalogDirThenRemoteInBackground(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "mycloud.csv", strings.Join(CSVColumns, ",")+"\nbox,r1,0.5,2,8.0,0,,,False,,,,x86,{}\n")
	b := newBucket()
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	b.publish(t, "verda", "20261122-1", `1H100.80S.22V,FIN-01,2.19,22,80.0,1,H100,80.0,False,,nvidia,,x86,{}`)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	m, err := Open(ctx, Sources{CatalogDir: dir, CatalogURL: srv.URL + "/v3", Client: srv.Client(),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m.Query(t.Context(), Query{}).Offers); n < 1 {
		t.Fatal("catalog dir not served right after Open")
	}
	for m.Catalog().Len() != 2 {
		select {
		case <-t.Context().Done():
			t.Fatal("remote catalog never arrived")
		default:
			time.Sleep(5 * time.Millisecond)
		}
	}
	if ans := m.Query(t.Context(), Query{Backends: []string{"verda"}, GPUCount: AtLeast(1)}); len(ans.Offers) != 1 {
		t.Errorf("verda offers after refresh: %d", len(ans.Offers))
	}
}

func TestRemote_stalledServerTimesOut(t *testing.T) {
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(stall); srv.Close() })
	r, err := NewRemote(RemoteConfig{URL: srv.URL, Providers: []string{"aws"}, Client: srv.Client(),
		Timeout: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(t.Context()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Refresh = %v, want a deadline error", err)
	}
}

// versions returns the version of each provider r downloaded so far.
func versions(r *Remote) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.loaded))
	for p, t := range r.loaded {
		out[p] = t.Version
	}
	return out
}
