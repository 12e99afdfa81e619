package reconciler

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestSpecRepoPath_resolvesAgainstTheSpecDirAndStaysInTheRepository(t *testing.T) {
	for _, tc := range []struct {
		base, local, want string
		ok                bool
	}{
		{"specs", "..", ".", true},
		{"specs", ".", "specs", true},
		{"specs", "../conf/a.txt", "conf/a.txt", true},
		{".", "app", "app", true},
		{".", "..", "", false},
		{"specs", "../../x", "", false},
		{"specs", "/etc", "", false},
	} {
		got, ok := specRepoPath(tc.base, tc.local)
		if got != tc.want || ok != tc.ok {
			t.Errorf("specRepoPath(%q, %q) = %q, %v; want %q, %v", tc.base, tc.local, got, ok, tc.want, tc.ok)
		}
	}
}

func TestAddTree_listsAFileOrADirectoryUnderItsNameWithContentHashes(t *testing.T) {
	fsys := fstest.MapFS{
		"app/a.txt":     {Data: []byte("A")},
		"app/b.txt":     {Data: []byte("A")},
		"app/bin/run":   {Data: []byte("R"), Mode: 0o755},
		"conf/settings": {Data: []byte("S")},
	}
	j := &jobCode{blobs: map[string]func() (io.ReadCloser, error){}}
	if err := addTree(j, fsys, "app", "repo"); err != nil {
		t.Fatal(err)
	}
	if err := addTree(j, fsys, "conf/settings", "files/0"); err != nil {
		t.Fatal(err)
	}
	if err := addTree(j, fsys, "missing", "files/1"); err == nil {
		t.Error("addTree of a missing path succeeded")
	}
	var got []string
	for _, e := range j.manifest.Entries {
		got = append(got, fmt.Sprintf("%s %s %o %d", e.Path, e.Type, e.Mode, e.Size))
	}
	want := []string{"repo dir 755 0", "repo/a.txt file 644 1", "repo/b.txt file 644 1", "repo/bin dir 755 0", "repo/bin/run file 755 1", "files/0 file 644 1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("manifest (-want +got):\n%s", diff)
	}
	// Two files of the same content are one blob.
	if len(j.blobs) != 3 {
		t.Errorf("%d blobs, want 3 (a.txt and b.txt share one)", len(j.blobs))
	}
	h := sha256.Sum256([]byte("R"))
	rc, err := j.open(hex.EncodeToString(h[:]))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, _ := io.ReadAll(rc); string(b) != "R" {
		t.Errorf("blob of bin/run = %q", b)
	}
}

func TestGitSecrets_nameTheHostSpecificSecretFirst(t *testing.T) {
	for _, tc := range []struct {
		url   string
		names []string
		ssh   bool
		err   bool
	}{
		{"https://git.example.com/org/repo.git", []string{"HOIST_GIT_TOKEN_GIT_EXAMPLE_COM", "HOIST_GIT_TOKEN"}, false, false},
		{"http://127.0.0.1:8080/r.git", []string{"HOIST_GIT_TOKEN_127_0_0_1", "HOIST_GIT_TOKEN"}, false, false},
		{"git@github.com:org/repo.git", []string{"HOIST_GIT_SSH_KEY_GITHUB_COM", "HOIST_GIT_SSH_KEY"}, true, false},
		{"ssh://git@gitlab.example.org:2222/org/repo.git", []string{"HOIST_GIT_SSH_KEY_GITLAB_EXAMPLE_ORG", "HOIST_GIT_SSH_KEY"}, true, false},
		{"file:///etc", nil, false, true},
	} {
		names, ssh, err := gitSecrets(tc.url)
		if (err != nil) != tc.err || ssh != tc.ssh || !cmp.Equal(names, tc.names) {
			t.Errorf("gitSecrets(%q) = %v, %v, %v; want %v, %v, error %v", tc.url, names, ssh, err, tc.names, tc.ssh, tc.err)
		}
	}
}
