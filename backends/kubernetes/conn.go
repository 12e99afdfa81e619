package kubernetes

import (
	"context"
	"errors"

	"hoist/backends"
)

// newConn returns the connection to the shim API of one instance: an HTTP
// client whose requests to the ShimURL are answered in this process by the
// pod shim, and whose requests to a runner address go through a
// port-forward to the runner in the task's pod.
//
// Stub: the pod shim replaces it.
func newConn(ctx context.Context, c *cluster, rec instanceRecord) (backends.Conn, error) {
	return nil, errors.New("kubernetes: the pod shim is not built yet")
}

// deleteTasks deletes every pod and secret of instance id's tasks; gone is
// success.
//
// Stub: the pod shim replaces it.
func deleteTasks(ctx context.Context, c *cluster, id string) error {
	return errors.New("kubernetes: the pod shim is not built yet")
}
