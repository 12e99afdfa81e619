package shim

import (
	"context"
	"os"

	"hoist/agents/api"
	"hoist/agents/hostinfo"
)

// HostInfo describes the host (hostinfo.Probe) with the disk holding
// Docker's data root (the state dir when Docker does not say), Docker's
// version and the shim's.
func (s *Shim) HostInfo(ctx context.Context) api.HostInfo {
	diskPath, dockerVersion := s.cfg.StateDir, ""
	if info, err := s.docker.Info(ctx); err == nil {
		dockerVersion = info.ServerVersion
		if _, err := os.Stat(info.DockerRootDir); err == nil {
			diskPath = info.DockerRootDir
		}
	}
	h, err := hostinfo.Probe(ctx, diskPath)
	if err != nil {
		s.log.Warn("host_probe_incomplete", "error", err)
	}
	h.DockerVersion, h.ShimVersion = dockerVersion, s.cfg.Version
	return h
}
