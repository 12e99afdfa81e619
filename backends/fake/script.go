package fake

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"hoist/agents/api"
)

// Script runs a job's commands the way the fake runner does, and returns the
// exit code. Each command is split into lines; each line is one step:
//
//	echo WORDS...   prints WORDS to stdout ($NAME and ${NAME} expand from env)
//	echo2 WORDS...  prints WORDS to stderr
//	exit N          ends the job with exit code N
//	sleep D         waits D (a Go duration, or seconds) unless ctx ends first
//	anything else   succeeds without output
//
// The first failing step ends the script, as in a shell with `set -e`.
// When ctx ends during a sleep, Script returns -1.
func Script(ctx context.Context, commands []string, env map[string]string, write func(stream string, data []byte)) int {
	for _, cmd := range commands {
		for _, line := range strings.Split(cmd, "\n") {
			line = os.Expand(strings.TrimSpace(line), func(k string) string { return env[k] })
			word, rest, _ := strings.Cut(line, " ")
			rest = strings.TrimSpace(rest)
			switch word {
			case "echo":
				write(api.StreamStdout, []byte(rest+"\n"))
			case "echo2":
				write(api.StreamStderr, []byte(rest+"\n"))
			case "exit":
				n, err := strconv.Atoi(rest)
				if err != nil {
					write(api.StreamStderr, []byte(fmt.Sprintf("exit: bad code %q\n", rest)))
					return 2
				}
				return n
			case "sleep":
				d, err := time.ParseDuration(rest)
				if err != nil {
					f, ferr := strconv.ParseFloat(rest, 64)
					if ferr != nil {
						write(api.StreamStderr, []byte(fmt.Sprintf("sleep: bad duration %q\n", rest)))
						return 2
					}
					d = time.Duration(f * float64(time.Second))
				}
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return -1
				case <-t.C:
				}
			}
		}
	}
	return 0
}
