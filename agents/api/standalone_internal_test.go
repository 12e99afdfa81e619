package api

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestShellQuote_roundTripsThroughTheShell(t *testing.T) {
	for _, s := range []string{"", "plain", "it's", `["/bin/sh","-c","echo '$HOME' \"x\" $(id) \\ ;"]`, "two\nlines", "'''"} {
		out, err := exec.Command("/bin/sh", "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("sh printf %s = %q, %v; want %q", shellQuote(s), out, err, s)
		}
	}
}

// TestStandaloneCommand_withoutCurlOrWgetExits127SayingSo runs the start
// command where PATH has neither curl nor wget.
func TestStandaloneCommand_withoutCurlOrWgetExits127SayingSo(t *testing.T) {
	bin := t.TempDir()
	for _, tool := range []string{"rm", "mkdir"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skip(err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	argv := StandaloneCommand(StandaloneOptions{ImageCommand: []string{"python", "-c", "print('hi')"}, ImageWorkDir: "/work dir"})
	if argv[0] != "/bin/sh" || argv[1] != "-c" || len(argv) != 3 {
		t.Fatalf("argv = %q", argv)
	}
	if want := ` --image-command '["python","-c","print('\''hi'\'')"]' --image-workdir '/work dir'`; !strings.Contains(argv[2], want) {
		t.Fatalf("script lacks %s:\n%s", want, argv[2])
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + bin, "TMPDIR=" + t.TempDir(), RunnerEnvURL + "=http://127.0.0.1:1/runner?sig=secret", RunnerEnvAuth + "=x"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 127 {
		t.Fatalf("exit = %v, want 127; output:\n%s", err, out)
	}
	if want := "hoist: the image has neither curl nor wget: installing curl\n" +
		"hoist: the image has neither curl nor wget: cannot download hoist-runner from http://127.0.0.1:1/runner\n"; string(out) != want {
		t.Fatalf("output = %q, want %q", out, want)
	}
}
