package reconciler

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"hoist/backends"
)

// defaultSSHBackend is the name the default server config gives its SSH
// backend; of several backends that take over hosts, SSH fleets use the one
// of this name.
const defaultSSHBackend = "ssh"

// defaultLocalBackend is the name the default server config gives the
// backend of this host; of several backends that share this host, the
// server's own fleet of this host uses the one of this name.
const defaultLocalBackend = "local"

// traitsOf returns the traits of the backend configured as name; a backend
// that is not configured has none (the zero Traits).
func (c *Controller) traitsOf(name string) backends.Traits {
	if be, ok := c.bes[name]; ok {
		return be.Traits()
	}
	return backends.Traits{}
}

// sshBackend returns the name of the backend SSH fleets take their hosts
// over through: the configured backend whose traits say it takes over
// hosts (the one named "ssh" when there are several). A backend's name is
// the user's choice (`{name: gpu-hosts, type: ssh}`).
func (c *Controller) sshBackend() (string, error) {
	var found []string
	for name, be := range c.bes {
		if be.Traits().TakesOverHosts {
			found = append(found, name)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case slices.Contains(found, defaultSSHBackend):
		return defaultSSHBackend, nil
	case len(found) == 0:
		return "", backends.Stalled(errors.New("no backend of type ssh is configured: SSH fleets need one"))
	}
	slices.Sort(found)
	return "", backends.Stalled(fmt.Errorf("several backends of type ssh are configured (%s): name one of them \"ssh\"", strings.Join(found, ", ")))
}

// localBackend returns the name of the backend of this host among bes: the
// one whose traits say its instances share this host ("local" when several
// do, else the first by name), or "" when none does.
func localBackend(bes map[string]backends.Backend) string {
	if be, ok := bes[defaultLocalBackend]; ok && be.Traits().SharedHost {
		return defaultLocalBackend
	}
	for _, name := range slices.Sorted(maps.Keys(bes)) {
		if bes[name].Traits().SharedHost {
			return name
		}
	}
	return ""
}
