package reconciler

import (
	"fmt"
	"strings"

	shlex "github.com/anmitsu/go-shlex"
)

// entrypointArgv splits a spec's `entrypoint` into the program and
// arguments the runner executes, with the job's commands appended as
// further arguments and no shell, as dstack does (shlex.split of the
// entrypoint in dstack's jobs/configurators/base.py); nil when the spec has
// none.
func entrypointArgv(entrypoint string) ([]string, error) {
	if strings.TrimSpace(entrypoint) == "" {
		return nil, nil
	}
	argv, err := shlex.Split(entrypoint, true)
	if err != nil {
		return nil, fmt.Errorf("entrypoint %q: %w", entrypoint, err)
	}
	return argv, nil
}
