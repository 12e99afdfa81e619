package reconciler

import (
	"context"
	"encoding/json"
	"fmt"

	"hoist/backends/offers"
	"hoist/schema"
	"hoist/store"
)

// Blocks: a fleet's `blocks: N|auto` splits each of its instances into N
// equal shares of CPUs, memory and GPUs (the disk is not split) so that
// several jobs share one instance, each on the shares its resources need
// (dstack's server/services/offers.py is_divisible_into_blocks and
// generate_shared_offer, services/instances.py
// get_shared_instances_with_offers).

// splitBlocks returns how many blocks an instance of cpus CPUs and gpus
// GPUs splits into when its fleet asks for want (0: auto, as many as
// possible: the GPUs, or the CPUs without GPUs, whichever fewer); ok is
// false when the CPUs or the GPUs do not divide evenly.
func splitBlocks(cpus, gpus, want int) (int, bool) {
	n := want
	if n == 0 {
		n = cpus
		if gpus > 0 {
			n = min(cpus, gpus)
		}
	}
	if n < 1 || cpus%n != 0 || gpus%n != 0 {
		return 0, false
	}
	return n, true
}

// shareOffer is the offer for k of the total blocks of an instance of
// offer o: its CPUs, memory and GPUs divided by total and times k, its
// disk whole.
func shareOffer(o offers.Offer, k, total int) offers.Offer {
	if total <= 1 {
		return o
	}
	s := o
	s.CPUs = o.CPUs / total * k
	s.MemoryGB = o.MemoryGB / float64(total) * float64(k)
	s.GPUCount = o.GPUCount / total * k
	if s.GPUCount == 0 {
		s.GPUVendor, s.GPUName, s.GPUMemoryGB = "", "", 0
	}
	return s
}

// blocksFor returns the fewest of an instance's total blocks whose share
// of offer o passes q, all of them for a multi-node job (which takes whole
// instances); 0 when no share does.
func blocksFor(o offers.Offer, total int, q offers.Query, multinode bool) int {
	first := 1
	if multinode {
		first = total
	}
	for k := first; k <= total; k++ {
		if len(offers.Filter([]offers.Offer{shareOffer(o, k, total)}, q)) > 0 {
			return k
		}
	}
	return 0
}

// fleetBlocks returns the blocks a fleet's spec asks of instance inst
// (0: auto): an SSH host's own `blocks`, else the fleet's; 1 for a spec
// that says none (the server's own fleet) or cannot be read.
func fleetBlocks(f store.Fleet, inst store.Instance) int {
	var spec struct {
		Blocks    *int `json:"blocks"`
		SSHConfig *struct {
			Hosts []schema.SSHHost `json:"hosts"`
		} `json:"ssh_config"`
	}
	if len(f.Spec) == 0 || json.Unmarshal(f.Spec, &spec) != nil {
		return 1
	}
	if spec.SSHConfig != nil {
		for _, h := range spec.SSHConfig.Hosts {
			if h.Hostname == inst.Hostname && h.Blocks != nil {
				return *h.Blocks
			}
		}
	}
	if spec.Blocks == nil {
		return 1
	}
	return *spec.Blocks
}

// instanceBlocks returns how many blocks instance inst of fleet f, known
// by offer o, is split into, or an error saying why it cannot be.
func instanceBlocks(f store.Fleet, inst store.Instance, o offers.Offer) (int, error) {
	want := fleetBlocks(f, inst)
	if want == 1 {
		return 1, nil
	}
	if !splittableGPUs(o) {
		return 0, fmt.Errorf("cannot split %s GPUs into blocks", o.GPUVendor)
	}
	n, ok := splitBlocks(o.CPUs, o.GPUCount, want)
	if !ok {
		what := fmt.Sprint(want)
		if want == 0 {
			what = "auto"
		}
		return 0, fmt.Errorf("cannot split %d cpus and %d gpus into %s blocks", o.CPUs, o.GPUCount, what)
	}
	return n, nil
}

// splittableGPUs reports whether an instance of offer o may be split as
// far as its GPUs go: only NVIDIA GPUs are handed to tasks one by one
// (agents/shim), so a share of other GPUs would not be its own.
func splittableGPUs(o offers.Offer) bool {
	return o.GPUCount == 0 || o.GPUVendor == "" || o.GPUVendor == "nvidia"
}

// divisibleOffers keeps the offers an instance could be made of for a
// fleet that asks for want blocks (dstack's _get_shareable_offers).
func divisibleOffers(all []offers.Offer, want int) []offers.Offer {
	if want == 1 {
		return all
	}
	var out []offers.Offer
	for _, o := range all {
		if _, ok := splitBlocks(o.CPUs, o.GPUCount, want); ok && splittableGPUs(o) {
			out = append(out, o)
		}
	}
	return out
}

// share is what a job takes of an instance: blocks of its total; blocks
// is 0 when the job does not fit.
type share struct {
	blocks, total int
}

// fits reports whether the job fits on the instance.
func (s share) fits() bool { return s.blocks > 0 }

// shareOn returns the share of instance inst (known by offer o) of fleet f
// that a job of query q takes now: none when the instance cannot be split
// as its fleet asks, no share of it passes q, or fewer of its blocks are
// free.
func (c *Controller) shareOn(ctx context.Context, f store.Fleet, inst store.Instance, o offers.Offer, q offers.Query, multinode bool) (share, error) {
	total, err := instanceBlocks(f, inst, o)
	if err != nil {
		c.log.Warn("instance not split into blocks", "instance", inst.Name, "error", err)
		return share{}, nil
	}
	k := blocksFor(o, total, q, multinode)
	if k == 0 {
		return share{total: total}, nil
	}
	busy, err := c.st.BusyBlocks(ctx, inst.ID, "", total)
	if err != nil {
		return share{}, err
	}
	if busy+k > total {
		return share{total: total}, nil
	}
	return share{blocks: k, total: total}, nil
}

// jobShare returns the share of instance inst a job of spec takes,
// whether or not its blocks are free (the assignment checks that); none
// when the instance cannot be split as its fleet asks or no share fits.
func (c *Controller) jobShare(ctx context.Context, inst store.Instance, spec runSpec) (share, error) {
	if inst.FleetID == "" {
		return share{blocks: 1, total: 1}, nil
	}
	f, err := c.st.GetFleet(ctx, inst.FleetID)
	if err != nil {
		return share{}, err
	}
	var o offers.Offer
	if len(inst.Offer) > 0 {
		_ = json.Unmarshal(inst.Offer, &o)
	}
	total, err := instanceBlocks(f, inst, o)
	if err != nil {
		return share{}, nil
	}
	if total == 1 {
		return share{blocks: 1, total: 1}, nil // the whole instance, as placed
	}
	return share{blocks: blocksFor(o, total, instanceQuery(spec), spec.multiNode()), total: total}, nil
}

// jobPart returns the part of its instance a placed job holds, when it
// holds only some of the instance's blocks; ok is false when the job has
// the whole instance (or the instance is this host's, shared without
// blocks).
func (c *Controller) jobPart(ctx context.Context, job store.Job) (offers.Offer, bool, error) {
	if job.InstanceID == "" || job.Blocks < 1 {
		return offers.Offer{}, false, nil
	}
	inst, err := c.st.GetInstance(ctx, job.InstanceID)
	if err != nil || inst.FleetID == "" || c.sharedInstance(ctx, inst) {
		return offers.Offer{}, false, err
	}
	f, err := c.st.GetFleet(ctx, inst.FleetID)
	if err != nil {
		return offers.Offer{}, false, err
	}
	var o offers.Offer
	if len(inst.Offer) > 0 {
		_ = json.Unmarshal(inst.Offer, &o)
	}
	total, err := instanceBlocks(f, inst, o)
	if err != nil || job.Blocks >= total {
		return offers.Offer{}, false, nil
	}
	return shareOffer(o, job.Blocks, total), true, nil
}
