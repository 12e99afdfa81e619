package api

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
)

// maxBlobBatchBytes is how much blob content one SendCodeBlobs request
// carries at most (a single larger blob travels alone): gzip and tar
// headers add a little to incompressible content, and what travels must
// stay under MaxCodeArchiveBytes.
const maxBlobBatchBytes = MaxCodeArchiveBytes / 4 * 3

// maxBlobSends is how often one blob is sent before SendCode gives up: a
// blob the runner asks for again was refused (it did not match its hash)
// or evicted by another job in between.
const maxBlobSends = 3

// CodeDelivery says what a SendCode sent.
type CodeDelivery struct {
	// Blobs is the number of blobs that travelled, and Bytes their size
	// before compression.
	Blobs int
	Bytes int64
	// Sent is what travelled in blob requests, compressed.
	Sent int64
}

// SendCode delivers a job's code to the runner: the manifest, then the
// blobs the runner lacks, read through open, in as many requests as they
// need, until the runner has placed the code. Call it after Submit and
// before Run.
func (r *RunnerClient) SendCode(ctx context.Context, m CodeManifest, open func(sha256 string) (io.ReadCloser, error)) (CodeDelivery, error) {
	var d CodeDelivery
	size := map[string]int64{}
	where := map[string]string{}
	for _, e := range m.Entries {
		if e.Type == CodeEntryFile {
			size[e.SHA256] = e.Size
			if where[e.SHA256] == "" {
				where[e.SHA256] = e.Path
			}
		}
	}
	st, err := r.SendCodeManifest(ctx, m)
	if err != nil {
		return d, err
	}
	sends := map[string]int{}
	for !st.Placed {
		if len(st.Missing) == 0 {
			return d, fmt.Errorf("the runner neither placed the code nor named a missing blob")
		}
		var batch []string
		var n int64
		for _, sum := range st.Missing {
			sz, ok := size[sum]
			if !ok {
				return d, fmt.Errorf("the runner asks for blob %s, which is not in the manifest", sum)
			}
			if len(batch) > 0 && n+sz > maxBlobBatchBytes {
				break
			}
			if sends[sum]++; sends[sum] > maxBlobSends {
				return d, fmt.Errorf("the runner refused blob %s of %s %d times", sum, where[sum], maxBlobSends)
			}
			batch, n = append(batch, sum), n+sz
		}
		body, err := blobTar(batch, size, where, open)
		if err != nil {
			return d, err
		}
		d.Blobs, d.Bytes, d.Sent = d.Blobs+len(batch), d.Bytes+n, d.Sent+int64(len(body))
		if st, err = r.SendCodeBlobs(ctx, bytes.NewReader(body)); err != nil {
			return d, err
		}
	}
	return d, nil
}

// blobTar builds one SendCodeBlobs body of the blobs named in batch.
func blobTar(batch []string, size map[string]int64, where map[string]string, open func(string) (io.ReadCloser, error)) ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	for _, sum := range batch {
		rc, err := open(sum)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", where[sum], err)
		}
		err = tw.WriteHeader(&tar.Header{Name: sum, Mode: 0o644, Size: size[sum], Typeflag: tar.TypeReg})
		if err == nil {
			_, err = io.Copy(tw, rc)
		}
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", where[sum], err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
