package shim

import (
	"fmt"

	"hoist/agents/api"
)

// transitions lists, for every task status, the statuses it may move to.
// A task skips pulling when its image is present; every status but
// terminated may end in terminated.
var transitions = map[string][]string{
	api.TaskPending:    {api.TaskPreparing, api.TaskTerminated},
	api.TaskPreparing:  {api.TaskPulling, api.TaskCreating, api.TaskTerminated},
	api.TaskPulling:    {api.TaskCreating, api.TaskTerminated},
	api.TaskCreating:   {api.TaskRunning, api.TaskTerminated},
	api.TaskRunning:    {api.TaskTerminated},
	api.TaskTerminated: nil,
}

// Transition reports whether a task may move from one status to another; it
// returns an error saying why not.
func Transition(from, to string) error {
	next, ok := transitions[from]
	if !ok {
		return fmt.Errorf("unknown task status %q", from)
	}
	if _, ok := transitions[to]; !ok {
		return fmt.Errorf("unknown task status %q", to)
	}
	for _, n := range next {
		if n == to {
			return nil
		}
	}
	return fmt.Errorf("task cannot move from %s to %s", from, to)
}
