package e2e

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// artifactsProvider is a CUE provider of two jobs: make writes `files`
// files of `size` random bytes each into out/ (its artifact) and prints
// the first one's md5sum; check, after make, receives out/ and prints its
// size, file count and the same md5sum.
const artifactsProvider = `providers:
  - name: bulk
    schema:
      type: object
      additionalProperties: false
      properties:
        files: {type: integer}
        size: {type: integer}
      required: [files, size]
    cue: |
      parameters: {files: int, size: int}
      jobs: [{
        name: "make"
        image: "` + testenv.BusyboxImage + `"
        commands: [
          "mkdir -p out",
          "i=0; while [ $i -lt \(parameters.files) ]; do head -c \(parameters.size) /dev/urandom > out/f$i.bin; i=$((i+1)); done",
          "md5sum out/f0.bin",
        ]
        artifacts: ["out"]
        resources: {cpu: "1..", memory: "0.1GB.."}
      }, {
        name: "check"
        image: "` + testenv.BusyboxImage + `"
        commands: ["du -sk out", "ls out | wc -l", "md5sum out/f0.bin"]
        depends_on: ["make"]
        resources: {cpu: "1..", memory: "0.1GB.."}
      }]
`

// logFields returns the key=value fields of the first server log line of
// message msg about job jobID (nil when there is none).
func logFields(log, msg, jobID string) map[string]string {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "msg="+msg+" ") || !strings.Contains(line, "job_id="+jobID) {
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
		return kv
	}
	return nil
}

// TestMeasure_workflowArtifacts measures a workflow's artifacts through a
// real hoist serve and Docker on this host, next to `cp -r`: a CUE
// provider's job writes 16 files of 16 MiB (256 MiB of /dev/urandom) into
// its artifact folder; the server keeps them when it ends
// (job_artifacts_kept: upload from the runner into the artifact store);
// the job after it receives them with its code (job_code_delivered:
// placement); `hoist artifacts get` downloads them; `cp -r` copies the
// downloaded files on this machine. It prints one table of bytes, time,
// MiB/s and the ratio to cp. Set HOIST_MEASURE=1 to run it;
// HOIST_MEASURE_ARTIFACT_FILES and HOIST_MEASURE_ARTIFACT_MIB change 16
// and 256 (the total).
func TestMeasure_workflowArtifacts(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("measurement: set HOIST_MEASURE=1")
	}
	files, mib := 16, 256
	if v, err := strconv.Atoi(os.Getenv("HOIST_MEASURE_ARTIFACT_FILES")); err == nil && v > 0 {
		files = v
	}
	if v, err := strconv.Atoi(os.Getenv("HOIST_MEASURE_ARTIFACT_MIB")); err == nil && v > 0 {
		mib = v
	}
	size := int64(mib) << 20 / int64(files)
	total := size * int64(files)

	r := newRepo(t)
	r.write(".dstack/providers.yaml", artifactsProvider)
	r.write(".dstack/workflows.yaml", fmt.Sprintf("workflows:\n  - name: bulk\n    provider: bulk\n    files: %d\n    size: %d\n", files, size))
	s := startServer(t, r.dir)
	start := time.Now()
	sha := r.commit("a workflow moving artifacts")
	s.waitRun("bulk", sha, "done", 15*time.Minute)
	commitToDone := time.Since(start)

	jobs := s.workflowRun("bulk").jobsByName()
	mk, check := jobs["make"], jobs["check"]
	mkLogs, checkLogs := s.jobLogs("bulk", mk.ID), s.jobLogs("bulk", check.ID)
	sum := strings.Fields(mkLogs)
	if len(sum) < 1 || !strings.Contains(checkLogs, sum[0]+"  out/f0.bin") || !strings.Contains(checkLogs, fmt.Sprintf("\n%d\n", files)) {
		t.Fatalf("check did not receive make's files:\nmake: %q\ncheck: %q", mkLogs, checkLogs)
	}
	log := s.logText()
	kept := logFields(log, "job_artifacts_kept", mk.ID)
	placed := logFields(log, "job_code_delivered", check.ID)
	if kept == nil || placed == nil {
		t.Fatalf("no job_artifacts_kept for make (%v) or job_code_delivered for check (%v):\n%s", kept, placed, log)
	}
	if kept["bytes"] != strconv.FormatInt(total, 10) {
		t.Errorf("job_artifacts_kept bytes=%s, want %d", kept["bytes"], total)
	}

	dl := t.TempDir()
	start = time.Now()
	if out, err := s.hoistCLI(r.dir, "artifacts", "get", "bulk", "--job", strconv.Itoa(mk.JobNum), "-o", dl); err != nil {
		t.Fatalf("hoist artifacts get: %v\n%s", err, out)
	}
	download := time.Since(start)
	got, err := os.ReadFile(filepath.Join(dl, "out", "f0.bin"))
	if h := md5.Sum(got); err != nil || hex.EncodeToString(h[:]) != sum[0] {
		t.Fatalf("downloaded out/f0.bin: %v, md5 %x, want %s", err, h, sum[0])
	}

	dst := filepath.Join(t.TempDir(), "copy")
	start = time.Now()
	if out, err := exec.Command("cp", "-r", filepath.Join(dl, "out"), dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -r: %v\n%s", err, out)
	}
	cp := time.Since(start)

	dur := func(kv map[string]string) time.Duration {
		d, err := time.ParseDuration(kv["duration"])
		if err != nil {
			t.Fatalf("duration %q: %v", kv["duration"], err)
		}
		return d
	}
	placedBytes, _ := strconv.ParseInt(placed["bytes"], 10, 64)
	rate := func(b int64, d time.Duration) float64 { return float64(b) / float64(1<<20) / d.Seconds() }
	cpRate := rate(total, cp)
	fmt.Printf("MEASURE workflow artifacts: %d files × %d bytes (%d MiB of /dev/urandom), real hoist serve + Docker (busybox), file-system artifact store\n", files, size, mib)
	fmt.Printf("MEASURE   %-44s %12s %12s %10s %8s\n", "step", "bytes", "time", "MiB/s", "vs cp")
	for _, row := range []struct {
		name  string
		bytes int64
		d     time.Duration
	}{
		{"upload: runner → store (job_artifacts_kept)", total, dur(kept)},
		{"placement into check (job_code_delivered)", placedBytes, dur(placed)},
		{"download: hoist artifacts get", total, download},
		{"reference: cp -r on this machine", total, cp},
	} {
		r := rate(row.bytes, row.d)
		fmt.Printf("MEASURE   %-44s %12d %12s %10.1f %7.2fx\n", row.name, row.bytes, row.d.Round(time.Millisecond), r, r/cpRate)
	}
	fmt.Printf("MEASURE   placement detail: %s blobs sent of %s, %s bytes sent, %s bytes on the wire (gzip, BestSpeed)\n",
		placed["blobs_sent"], placed["blobs"], placed["bytes_sent"], placed["wire_bytes"])
	fmt.Printf("MEASURE   commit → run done %s (make writes the files, check reads them)\n", commitToDone.Round(time.Millisecond))
}
