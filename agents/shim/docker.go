package shim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/go-connections/nat"

	"hoist/agents/api"
)

// pullMessage is one message of Docker's image pull progress stream.
type pullMessage struct {
	Status   string `json:"status"`
	ID       string `json:"id"`
	Progress *struct {
		Current int64 `json:"current"`
		Total   int64 `json:"total"`
	} `json:"progressDetail"`
	Error *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// layerProgress tracks one layer of a pull.
type layerProgress struct {
	total, downloaded, extracted int64
	sized, done                  bool
}

// pullTracker folds pull messages into a PullProgress.
type pullTracker struct {
	layers map[string]*layerProgress
	order  []string
}

func newPullTracker() *pullTracker { return &pullTracker{layers: map[string]*layerProgress{}} }

func (p *pullTracker) layer(id string) *layerProgress {
	l, ok := p.layers[id]
	if !ok {
		l = &layerProgress{}
		p.layers[id] = l
		p.order = append(p.order, id)
	}
	return l
}

// add folds one message in; it returns the pull's error, if the message is one.
func (p *pullTracker) add(m pullMessage) error {
	if m.Error != nil {
		return errors.New(m.Error.Message)
	}
	if m.ID == "" || strings.HasPrefix(m.Status, "Pulling from") || strings.HasPrefix(m.Status, "Digest:") || strings.HasPrefix(m.Status, "Status:") {
		return nil
	}
	l := p.layer(m.ID)
	switch {
	case m.Status == "Downloading" && m.Progress != nil:
		if m.Progress.Total > 0 {
			l.total, l.sized = m.Progress.Total, true
		}
		l.downloaded = m.Progress.Current
	case m.Status == "Download complete" || m.Status == "Verifying Checksum":
		l.downloaded = l.total
	case m.Status == "Extracting" && m.Progress != nil:
		if m.Progress.Total > 0 && !l.sized {
			l.total, l.sized = m.Progress.Total, true
		}
		l.downloaded = l.total
		l.extracted = m.Progress.Current
	case m.Status == "Pull complete":
		l.downloaded, l.extracted, l.done, l.sized = l.total, l.total, true, true
	case m.Status == "Already exists":
		l.done, l.sized = true, true
	}
	return nil
}

func (p *pullTracker) progress(final bool) api.PullProgress {
	var pp api.PullProgress
	pp.TotalFinal = final
	all := len(p.order) > 0
	for _, id := range p.order {
		l := p.layers[id]
		pp.TotalBytes += l.total
		pp.DownloadedBytes += l.downloaded
		pp.ExtractedBytes += l.extracted
		all = all && l.sized
	}
	pp.TotalFinal = final || all
	return pp
}

// pull pulls ref with auth, reporting progress in the task's info.
func (s *Shim) pull(ctx context.Context, t *task, ref string, auth *api.RegistryAuth) error {
	opts := image.PullOptions{}
	if auth != nil {
		enc, err := registry.EncodeAuthConfig(registry.AuthConfig{Username: auth.Username, Password: auth.Password, ServerAddress: auth.ServerAddress})
		if err != nil {
			return fmt.Errorf("pull %s: encode credentials: %w", ref, err)
		}
		opts.RegistryAuth = enc
	}
	start := time.Now()
	rc, err := s.docker.ImagePull(ctx, ref, opts)
	if err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	defer rc.Close()
	tr := newPullTracker()
	dec := json.NewDecoder(rc)
	last := time.Time{}
	for {
		var m pullMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("pull %s: read progress: %w", ref, err)
		}
		if err := tr.add(m); err != nil {
			return fmt.Errorf("pull %s: %w", ref, err)
		}
		if now := time.Now(); now.Sub(last) > 50*time.Millisecond {
			last = now
			pp := tr.progress(false)
			s.update(t, api.TaskPulling, func(i *api.TaskInfo) { i.Pull = pp })
		}
	}
	pp := tr.progress(true)
	s.update(t, api.TaskPulling, func(i *api.TaskInfo) { i.Pull = pp })
	s.log.Info("image_pulled", "task_id", t.info.ID, "image", ref, "bytes", pp.TotalBytes, "duration", time.Since(start))
	return nil
}

func containerPort(p int) nat.Port { return nat.Port(strconv.Itoa(p) + "/tcp") }

// portBindings publishes the task's ports on the host's loopback address
// (the runner has none: it answers on a Unix socket).
func portBindings(ports []api.PortMapping) (nat.PortSet, nat.PortMap) {
	set := nat.PortSet{}
	m := nat.PortMap{}
	bind := func(container, host int) {
		cp := containerPort(container)
		set[cp] = struct{}{}
		hp := ""
		if host > 0 {
			hp = strconv.Itoa(host)
		}
		m[cp] = append(m[cp], nat.PortBinding{HostIP: "127.0.0.1", HostPort: hp})
	}
	for _, p := range ports {
		bind(p.Container, p.Host)
	}
	return set, m
}

// gpuRequests turns the spec's GPU wishes into Docker device requests
// (NVIDIA) or device mappings (AMD).
func gpuRequests(spec api.TaskSpec) ([]container.DeviceRequest, []container.DeviceMapping) {
	if spec.GPUCount == 0 && len(spec.GPUIDs) == 0 {
		return nil, nil
	}
	if spec.GPUVendor == "amd" {
		devs := []container.DeviceMapping{{PathOnHost: "/dev/kfd", PathInContainer: "/dev/kfd", CgroupPermissions: "rwm"}}
		if len(spec.GPUIDs) == 0 {
			devs = append(devs, container.DeviceMapping{PathOnHost: "/dev/dri", PathInContainer: "/dev/dri", CgroupPermissions: "rwm"})
		}
		for _, id := range spec.GPUIDs {
			p := "/dev/dri/" + id
			if strings.HasPrefix(id, "/dev/") {
				p = id
			}
			devs = append(devs, container.DeviceMapping{PathOnHost: p, PathInContainer: p, CgroupPermissions: "rwm"})
		}
		return nil, devs
	}
	req := container.DeviceRequest{Driver: "nvidia", Capabilities: [][]string{{"gpu"}}}
	if len(spec.GPUIDs) > 0 {
		req.DeviceIDs = spec.GPUIDs
	} else {
		req.Count = spec.GPUCount
	}
	return []container.DeviceRequest{req}, nil
}
