package reconciler

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"hoist/backends"
)

// SSHBackend is the type of the SSH fleet backend; LocalBackendType the type
// of the backend of this host. A backend's name is the user's choice
// (`{name: gpu-hosts, type: ssh}`): compare types, via backendType.
const (
	SSHBackend       = "ssh"
	LocalBackendType = "local"
)

// backendType returns the type of the backend configured as name (its
// name when the config gave none).
func (c *Controller) backendType(name string) string {
	if t, ok := c.backTypes[name]; ok && t != "" {
		return t
	}
	return name
}

// sshBackend returns the name of the backend SSH fleets provision through:
// the configured backend of type ssh (the one named "ssh" when there are
// several).
func (c *Controller) sshBackend() (string, error) {
	var found []string
	for name := range c.bes {
		if c.backendType(name) == SSHBackend {
			found = append(found, name)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case slices.Contains(found, SSHBackend):
		return SSHBackend, nil
	case len(found) == 0:
		return "", backends.Stalled(errors.New("no backend of type ssh is configured: SSH fleets need one"))
	}
	slices.Sort(found)
	return "", backends.Stalled(fmt.Errorf("several backends of type ssh are configured (%s): name one of them \"ssh\"", strings.Join(found, ", ")))
}
