package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// deliverScript runs in a task's init container with the runner token (one
// line) and then the hoist-runner binary on its stdin: it puts both into
// the bin emptyDir under temporary names, renames them into place and
// creates the ready file the init container waits for. Temporary names
// carry the shell's pid, so two deliveries at once (two servers) cannot mix
// their bytes; a pod that is ready already is left alone. The shell's read
// takes one line of a pipe and no more (POSIX read), so cat gets the rest.
const deliverScript = `set -e
d=` + binDir + `
if [ -f ` + readyFile + ` ]; then cat >/dev/null; exit 0; fi
IFS= read -r tok
umask 077
printf '%s\n' "$tok" >"$d/.runner-token.$$"
mv -f "$d/.runner-token.$$" ` + runnerTokenFile + `
cat >"$d/.hoist-runner.$$"
chmod 755 "$d/.hoist-runner.$$"
mv -f "$d/.hoist-runner.$$" ` + runnerBinary + `
touch ` + readyFile + `
`

// deliverRunner copies the runner binary at path and token into the init
// container of pod (client-go's exec with stdin, as `kubectl exec -i`), which
// then completes and lets the job container start.
func deliverRunner(ctx context.Context, c *cluster, pod, path, token string) error {
	bin, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("runner binary: %w", err)
	}
	defer bin.Close()
	stdin := io.MultiReader(strings.NewReader(token+"\n"), bin)
	return execIn(ctx, c, pod, initContainer, []string{"sh", "-c", deliverScript}, stdin)
}

// execIn runs argv in container of pod with stdin, and fails with what it
// wrote to stderr when it exits non-zero. WebSocket first, SPDY when the
// API server does not upgrade to it (as kubectl does).
func execIn(ctx context.Context, c *cluster, pod, container string, argv []string, stdin io.Reader) error {
	req := c.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(c.namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true},
			scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(c.rest, http.MethodGet, req.URL().String())
	if err != nil {
		return fmt.Errorf("exec in pod %s: %w", pod, err)
	}
	sp, err := remotecommand.NewSPDYExecutor(c.rest, http.MethodPost, req.URL())
	if err != nil {
		return fmt.Errorf("exec in pod %s: %w", pod, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, sp, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("exec in pod %s: %w", pod, err)
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 512 {
			msg = msg[:512]
		}
		return fmt.Errorf("exec in pod %s container %s: %w (stderr: %q)", pod, container, err, msg)
	}
	return nil
}
