package shim

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"hoist/agents/api"
)

// Recover rebuilds the shim's tasks after a restart from StateDir and the
// Engine's containers labelled with this shim's id: running containers are
// watched again and keep serving their runner; containers that exited while
// the shim was away are recorded as terminated; tasks whose container is
// gone are terminated with container_lost. Labelled containers without a
// task are reported (ListTasks) and left alone.
func (s *Shim) Recover(ctx context.Context) error {
	saved, err := s.loadPersisted()
	if err != nil {
		return err
	}
	s.pruneSocketLinks()
	list, err := s.docker.ContainerList(ctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", LabelShimID+"="+s.cfg.ID)),
	})
	if err != nil {
		return fmt.Errorf("recover: list containers: %w", err)
	}
	var unknown []api.UnknownContainer
	seen := map[string]bool{}
	for _, c := range list {
		if c.Labels[LabelNetnsHolder] != "" {
			// A namespace holder outlives only a start the shim did not
			// finish; the task's container, if any, holds the namespace.
			s.log.Info("netns_holder_removed", "container_id", c.ID, "task_id", c.Labels[LabelNetnsHolder])
			s.removeNetnsHolder(c.ID)
			continue
		}
		id := c.Labels[LabelTaskID]
		name := ""
		if len(c.Names) > 0 {
			name = c.Names[0][1:]
		}
		p, ok := saved[id]
		if !ok {
			s.log.Warn("container_unknown", "container_id", c.ID, "name", name, "task_id", id, "state", c.State)
			unknown = append(unknown, api.UnknownContainer{ContainerID: c.ID, Name: name, TaskID: id, State: c.State})
			continue
		}
		seen[id] = true
		if err := s.reattach(ctx, p, c.ID); err != nil {
			return err
		}
	}
	for id, p := range saved {
		if seen[id] {
			continue
		}
		t := s.adopt(p)
		if t == nil || t.info.Terminated() {
			continue
		}
		msg := "the task's container is gone"
		if t.info.ContainerID == "" {
			msg = "the shim restarted before the task's container was created"
		}
		s.mu.Lock()
		s.terminateLocked(t, api.ReasonContainerLost, msg, nil)
		close(t.exited)
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.unknown = unknown
	s.mu.Unlock()
	return nil
}

func (s *Shim) loadPersisted() (map[string]persisted, error) {
	dirs, err := os.ReadDir(filepath.Join(s.cfg.StateDir, "tasks"))
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	out := map[string]persisted{}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(s.cfg.StateDir, "tasks", d.Name(), "task.json"))
		if err != nil {
			s.log.Warn("task_state_unreadable", "task_id", d.Name(), "err", err)
			continue
		}
		var p persisted
		if err := json.Unmarshal(b, &p); err != nil || p.Info.ID != d.Name() {
			s.log.Warn("task_state_unreadable", "task_id", d.Name(), "err", err)
			continue
		}
		out[p.Info.ID] = p
	}
	return out, nil
}

// adopt registers a persisted task without a start sequence. It returns nil
// when the shim already has the task.
func (s *Shim) adopt(p persisted) *task {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tasks[p.Info.ID]; ok {
		return nil
	}
	t := &task{
		spec:    p.Spec,
		info:    p.Info,
		changed: make(chan struct{}),
		cancel:  func() {},
		settled: make(chan struct{}),
		exited:  make(chan struct{}),
	}
	close(t.settled)
	if t.info.Terminated() {
		close(t.exited)
	}
	s.tasks[p.Info.ID] = t
	return t
}

// reattach takes a persisted task back with its container.
func (s *Shim) reattach(ctx context.Context, p persisted, cid string) error {
	p.Info.ContainerID = cid
	t := s.adopt(p)
	if t == nil || t.info.Terminated() {
		return nil
	}
	c, err := s.docker.ContainerInspect(ctx, cid)
	if err != nil {
		return fmt.Errorf("recover: inspect %s: %w", cid, err)
	}
	if c.State == nil || !c.State.Running {
		s.recordExit(t, cid)
		return nil
	}
	addr, ports, err := s.published(ctx, cid, p.Spec)
	if err != nil {
		return fmt.Errorf("recover: %s: %w", p.Info.ID, err)
	}
	s.mu.Lock()
	t.info.Status = api.TaskRunning
	t.info.RunnerAddr, t.info.Ports = addr, ports
	t.info.Updated = s.now()
	s.persistLocked(t)
	s.mu.Unlock()
	s.log.Info("task_reattached", "task_id", p.Info.ID, "container_id", cid, "runner_addr", addr)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.watch(t, cid)
	}()
	return nil
}
