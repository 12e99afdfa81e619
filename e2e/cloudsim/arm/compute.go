package arm

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"hoist/e2e/cloudsim/sim"
)

// vmRequest is the part of a virtual machine PUT the simulator reads
// (https://learn.microsoft.com/rest/api/compute/virtual-machines/create-or-update).
type vmRequest struct {
	Location   string            `json:"location"`
	Tags       map[string]string `json:"tags"`
	Properties struct {
		HardwareProfile struct {
			VMSize string `json:"vmSize"`
		} `json:"hardwareProfile"`
		StorageProfile struct {
			ImageReference map[string]any `json:"imageReference"`
			DataDisks      []dataDisk     `json:"dataDisks"`
		} `json:"storageProfile"`
		OSProfile struct {
			AdminUsername      string `json:"adminUsername"`
			LinuxConfiguration struct {
				SSH struct {
					PublicKeys []struct {
						Path    string `json:"path"`
						KeyData string `json:"keyData"`
					} `json:"publicKeys"`
				} `json:"ssh"`
			} `json:"linuxConfiguration"`
		} `json:"osProfile"`
		NetworkProfile struct {
			NetworkAPIVersion              string `json:"networkApiVersion"`
			NetworkInterfaces              []any  `json:"networkInterfaces"`
			NetworkInterfaceConfigurations []struct {
				Name       string `json:"name"`
				Properties struct {
					NetworkSecurityGroup *struct {
						ID string `json:"id"`
					} `json:"networkSecurityGroup"`
					IPConfigurations []struct {
						Name       string `json:"name"`
						Properties struct {
							Subnet *struct {
								ID string `json:"id"`
							} `json:"subnet"`
							PublicIPAddressConfiguration *struct {
								Name string `json:"name"`
							} `json:"publicIPAddressConfiguration"`
						} `json:"properties"`
					} `json:"ipConfigurations"`
				} `json:"properties"`
			} `json:"networkInterfaceConfigurations"`
		} `json:"networkProfile"`
		Priority       string `json:"priority"`
		EvictionPolicy string `json:"evictionPolicy"`
		UserData       string `json:"userData"`
	} `json:"properties"`
}

// dataDisk is one entry of storageProfile.dataDisks.
type dataDisk struct {
	Lun          *int   `json:"lun"`
	CreateOption string `json:"createOption"`
	ToBeDetached bool   `json:"toBeDetached"`
	ManagedDisk  *struct {
		ID string `json:"id"`
	} `json:"managedDisk"`
}

// DevicePath is where a data disk at lun shows up in a Linux VM: the link
// Azure's udev rules make
// (https://learn.microsoft.com/troubleshoot/azure/virtual-machines/linux/troubleshoot-device-names-problems).
func DevicePath(lun int) string { return "/dev/disk/azure/scsi1/lun" + strconv.Itoa(lun) }

// vm serves /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{vm}.
func (h *server) vm(w http.ResponseWriter, r *http.Request, rg, nm, id string, body map[string]any) {
	switch r.Method {
	case http.MethodGet:
		res, ok := h.find(sim.KindInstance, id)
		if !ok {
			writeError(w, notFound(id))
			return
		}
		expand := r.URL.Query().Get("$expand")
		writeJSON(w, http.StatusOK, h.vmView(r, res, strings.EqualFold(expand, "instanceView"), strings.EqualFold(expand, "userData")))
	case http.MethodPut:
		h.putVM(w, r, rg, nm, id, body)
	case http.MethodPatch:
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		res, ok := h.find(sim.KindInstance, id)
		if !ok {
			writeError(w, notFound(id))
			return
		}
		h.updateVM(w, r, res, body)
	case http.MethodDelete:
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		res, ok := h.find(sim.KindInstance, id)
		if !ok {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if err := h.p.deleteVM(h.s, res, false); err != nil {
			writeError(w, errorf(http.StatusInternalServerError, "InternalServerError", "%v", err))
			return
		}
		op := h.opURL(r, res.Region, "delete."+res.ID)
		w.Header().Set("Azure-AsyncOperation", op)
		w.Header().Set("Location", op)
		w.WriteHeader(http.StatusAccepted)
	default:
		writeError(w, errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "%s is not allowed on virtual machines.", r.Method))
	}
}

// putVM creates a VM, or updates an existing one (tags and data disks: the
// only changes the simulator models; a repeated PUT is idempotent).
func (h *server) putVM(w http.ResponseWriter, r *http.Request, rg, nm, id string, body map[string]any) {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	if cur, ok := h.find(sim.KindInstance, id); ok {
		h.updateVM(w, r, cur, body)
		return
	}
	var req vmRequest
	if err := remarshal(body, &req); err != nil {
		writeError(w, errorf(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid: %v", err))
		return
	}
	p := req.Properties
	loc, size := normLocation(req.Location), p.HardwareProfile.VMSize
	spot := strings.EqualFold(p.Priority, "Spot")
	var keys []string
	for _, k := range p.OSProfile.LinuxConfiguration.SSH.PublicKeys {
		keys = append(keys, strings.TrimSpace(k.KeyData))
	}
	switch {
	case loc == "":
		writeError(w, errorf(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition."))
		return
	case size == "":
		writeError(w, errorf(http.StatusBadRequest, "InvalidParameter", "Required parameter 'hardwareProfile.vmSize' is missing (null)."))
		return
	case p.OSProfile.AdminUsername == "":
		writeError(w, errorf(http.StatusBadRequest, "InvalidParameter", "Required parameter 'osProfile.adminUsername' is missing (null)."))
		return
	case len(keys) == 0:
		writeError(w, errorf(http.StatusBadRequest, "InvalidParameter",
			"Required parameter 'osProfile.linuxConfiguration.ssh.publicKeys' is missing (the simulator has no password logins)."))
		return
	case spot && !strings.EqualFold(p.EvictionPolicy, "Delete") && !strings.EqualFold(p.EvictionPolicy, "Deallocate"):
		writeError(w, errorf(http.StatusBadRequest, "InvalidParameter", "Spot VMs need evictionPolicy Delete or Deallocate."))
		return
	case len(p.StorageProfile.DataDisks) > 0:
		writeError(w, errorf(http.StatusBadRequest, "InvalidParameter", "The simulator attaches data disks to existing VMs only (PATCH storageProfile.dataDisks)."))
		return
	case len(p.NetworkProfile.NetworkInterfaces) > 0 || len(p.NetworkProfile.NetworkInterfaceConfigurations) != 1:
		writeError(w, errorf(http.StatusBadRequest, "InvalidParameter",
			"The simulator creates VMs with exactly one networkProfile.networkInterfaceConfigurations entry."))
		return
	case p.NetworkProfile.NetworkAPIVersion == "":
		writeError(w, errorf(http.StatusBadRequest, "InvalidParameter", "networkApiVersion is required with networkInterfaceConfigurations."))
		return
	}
	nicCfg := p.NetworkProfile.NetworkInterfaceConfigurations[0]
	if len(nicCfg.Properties.IPConfigurations) != 1 || nicCfg.Properties.IPConfigurations[0].Properties.Subnet == nil {
		writeError(w, errorf(http.StatusBadRequest, "InvalidParameter", "The network interface configuration needs one IP configuration with a subnet."))
		return
	}
	ipCfg := nicCfg.Properties.IPConfigurations[0]
	subnetID := ipCfg.Properties.Subnet.ID
	if _, ok := h.findSubnet(subnetID); !ok {
		writeError(w, errorf(http.StatusBadRequest, "InvalidResourceReference", "Resource %s referenced by resource %s was not found.", subnetID, id))
		return
	}
	if nsg := nicCfg.Properties.NetworkSecurityGroup; nsg != nil {
		if _, ok := h.find(kindNetwork, nsg.ID); !ok {
			writeError(w, errorf(http.StatusBadRequest, "InvalidResourceReference", "Resource %s referenced by resource %s was not found.", nsg.ID, id))
			return
		}
	}
	price, ok := priceOf(size, loc, spot)
	if !ok {
		// SkuNotAvailable: the size is not offered (or restricted) in the
		// location (https://aka.ms/azureskunotavailable).
		writeError(w, errorf(http.StatusConflict, "SkuNotAvailable",
			"The requested VM size for resource 'Following SKUs have failed for Capacity Restrictions: %s' is currently not available in location '%s'. Please try another size or deploy to a different location or different zone. See https://aka.ms/azureskunotavailable for details.",
			size, loc))
		return
	}
	userData, err := base64.StdEncoding.DecodeString(p.UserData)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "InvalidParameter", "userData must be base64: %v", err))
		return
	}

	vmID := newGUID()
	rgPrefix := rgID(rg) + "/providers/"
	nicID := rgPrefix + typeNIC + "/" + nm + "-" + nicCfg.Name
	res := sim.Resource{
		Provider: name, Kind: sim.KindInstance, ID: vmID, Name: nm, State: sim.StatePending,
		Region: loc, InstanceType: size, Image: imageName(p.StorageProfile.ImageReference), Spot: spot,
		Tags: req.Tags, Price: price, User: p.OSProfile.AdminUsername, AuthorizedKeys: keys, UserData: string(userData),
		Extra: map[string]string{
			extraARMID: strings.ToLower(id), extraID: id, extraType: typeVM, extraRG: rg, extraNIC: nicID,
		},
	}
	if noCapacity(r) || !h.s.Take(size) {
		// Allocation failures come in the long-running operation
		// (https://learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/allocation-failure).
		res.State = stateFailed
		res.Extra[extraState] = "Failed"
		res.Extra[extraErrCode] = "AllocationFailed"
		res.Extra[extraErrMsg] = "Allocation failed. We do not have sufficient capacity for the requested VM size in this region. Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance"
	}
	delete(obj(body, "properties"), "userData")
	if osp, ok := obj(body, "properties")["osProfile"].(map[string]any); ok {
		delete(osp, "adminPassword")
		delete(osp, "customData")
	}
	setBody(&res, body)

	ipProps := map[string]any{
		"primary": true, "privateIPAllocationMethod": "Dynamic", "subnet": map[string]any{"id": subnetID},
	}
	if pip := ipCfg.Properties.PublicIPAddressConfiguration; pip != nil {
		pipID := rgPrefix + typePublicIP + "/" + nm + "-" + pip.Name
		res.Extra[extraPublicIP] = pipID
		ipProps["publicIPAddress"] = map[string]any{"id": pipID}
		h.putOwned(res, typePublicIP, pipID, nm+"-"+pip.Name, map[string]any{
			"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4",
			"ipConfiguration": map[string]any{"id": nicID + "/ipConfigurations/" + ipCfg.Name},
		})
	}
	nicProps := map[string]any{
		"ipConfigurations": []any{map[string]any{
			"id": nicID + "/ipConfigurations/" + ipCfg.Name, "name": ipCfg.Name, "properties": ipProps,
		}},
		"virtualMachine": map[string]any{"id": id},
		"primary":        true,
	}
	if nsg := nicCfg.Properties.NetworkSecurityGroup; nsg != nil {
		nicProps["networkSecurityGroup"] = map[string]any{"id": nsg.ID}
	}
	h.putOwned(res, typeNIC, nicID, nm+"-"+nicCfg.Name, nicProps)

	if _, err := h.s.Create(res); err != nil {
		writeError(w, errorf(http.StatusInternalServerError, "InternalServerError", "%v", err))
		return
	}
	if res.State == sim.StatePending {
		if err := h.s.Boot(name, vmID); err != nil {
			writeError(w, errorf(http.StatusInternalServerError, "InternalServerError", "boot: %v", err))
			return
		}
	}
	res, _ = h.s.Get(name, vmID)
	w.Header().Set("Azure-AsyncOperation", h.opURL(r, loc, "create."+vmID))
	writeJSON(w, http.StatusCreated, h.vmView(r, res, false, false))
}

// putOwned records a network resource a VM created for itself (its network
// interface and public IP address); it goes with the VM.
func (h *server) putOwned(vm sim.Resource, typ, id, nm string, props map[string]any) {
	props["provisioningState"] = "Succeeded"
	body := map[string]any{"id": id, "name": nm, "type": typ, "location": vm.Region, "properties": props}
	simID := strings.ToLower(id)
	set := func(r *sim.Resource) error {
		r.State, r.TerminatedAt, r.Region = sim.StateAvailable, nil, vm.Region
		r.Extra[extraVM] = vm.ID
		setBody(r, body)
		return nil
	}
	if _, ok := h.s.Get(name, simID); ok {
		_, _ = h.s.Update(name, simID, set)
		return
	}
	r := sim.Resource{
		Provider: name, Kind: kindNetwork, ID: simID, Name: nm,
		Extra: map[string]string{extraARMID: simID, extraID: id, extraType: typ, extraRG: vm.Extra[extraRG]},
	}
	_ = set(&r)
	_, _ = h.s.Create(r)
}

// imageName names an imageReference for the admin API: its id, or
// publisher:offer:sku:version.
func imageName(ref map[string]any) string {
	for _, k := range []string{"id", "communityGalleryImageId", "sharedGalleryImageId"} {
		if v, _ := ref[k].(string); v != "" {
			return v
		}
	}
	part := func(k string) string { v, _ := ref[k].(string); return v }
	return part("publisher") + ":" + part("offer") + ":" + part("sku") + ":" + part("version")
}

// updateVM applies a PUT to an existing VM or a PATCH: tags and data disks.
// The caller holds p.mu.
func (h *server) updateVM(w http.ResponseWriter, r *http.Request, res sim.Resource, body map[string]any) {
	var req vmRequest
	if err := remarshal(body, &req); err != nil {
		writeError(w, errorf(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid: %v", err))
		return
	}
	props := obj(body, "properties")
	var disks []any
	sp, hasSP := props["storageProfile"].(map[string]any)
	if hasSP {
		if _, ok := sp["dataDisks"]; ok {
			var e *armError
			if disks, e = h.reconcileDisks(res, req.Properties.StorageProfile.DataDisks); e != nil {
				writeError(w, e)
				return
			}
		}
	}
	res, err := h.s.Update(name, res.ID, func(vm *sim.Resource) error {
		if _, ok := body["tags"]; ok {
			vm.Tags = req.Tags
		}
		if disks != nil || (hasSP && sp["dataDisks"] != nil) {
			b := bodyOf(*vm)
			if disks == nil {
				disks = []any{}
			}
			obj(obj(b, "properties"), "storageProfile")["dataDisks"] = disks
			setBody(vm, b)
		}
		return nil
	})
	if err != nil {
		writeError(w, errorf(http.StatusInternalServerError, "InternalServerError", "%v", err))
		return
	}
	w.Header().Set("Azure-AsyncOperation", h.opURL(r, res.Region, "update."+res.ID))
	writeJSON(w, http.StatusOK, h.vmView(r, res, false, false))
}

// reconcileDisks makes the disks attached to vm the ones want lists
// (entries with toBeDetached are detached) and returns the VM's new
// storageProfile.dataDisks. It checks everything before changing anything.
func (h *server) reconcileDisks(vm sim.Resource, want []dataDisk) ([]any, *armError) {
	attached := map[string]sim.Resource{}
	for _, d := range h.s.List(name, sim.KindVolume) {
		if live(d) && d.AttachedTo == vm.ID {
			attached[d.ID] = d
		}
	}
	type target struct {
		disk sim.Resource
		lun  int
	}
	var targets []target
	luns := map[int]bool{}
	keep := map[string]bool{}
	for _, dd := range want {
		if dd.ToBeDetached {
			continue
		}
		if dd.ManagedDisk == nil || dd.ManagedDisk.ID == "" || !strings.EqualFold(dd.CreateOption, "Attach") {
			return nil, errorf(http.StatusBadRequest, "InvalidParameter", "The simulator attaches existing managed disks only (createOption Attach, managedDisk.id).")
		}
		if dd.Lun == nil || *dd.Lun < 0 || *dd.Lun > 63 {
			return nil, errorf(http.StatusBadRequest, "InvalidParameter", "The value of parameter lun is invalid; it must be 0 to 63.")
		}
		if luns[*dd.Lun] {
			return nil, errorf(http.StatusBadRequest, "InvalidParameter", "A disk at LUN %d already exists.", *dd.Lun)
		}
		luns[*dd.Lun] = true
		d, ok := h.find(sim.KindVolume, dd.ManagedDisk.ID)
		if !ok {
			return nil, errorf(http.StatusNotFound, "NotFound", "Disk %s is not found.", dd.ManagedDisk.ID)
		}
		if d.AttachedTo != "" && d.AttachedTo != vm.ID {
			other, _ := h.s.Get(name, d.AttachedTo)
			return nil, errorf(http.StatusConflict, "OperationNotAllowed", "Disk %s is attached to VM %s.", d.Name, other.Extra[extraID])
		}
		if d.Region != vm.Region {
			return nil, errorf(http.StatusBadRequest, "BadRequest", "Disk %s is in location %s, the VM in %s.", d.Name, d.Region, vm.Region)
		}
		keep[d.ID] = true
		targets = append(targets, target{d, *dd.Lun})
	}
	out := []any{}
	for _, t := range targets {
		device := DevicePath(t.lun)
		if t.disk.AttachedTo != vm.ID || t.disk.Device != device {
			// The disk shows up on this host (where every simulated VM
			// runs) as a loop device behind the link Azure's udev rules
			// make in a VM.
			if err := h.s.AttachDisk(name, t.disk.ID, vm.ID, device); errors.Is(err, sim.ErrDiskAttached) {
				// The link is host-wide: a disk of another simulated VM
				// holds this LUN's link until it is detached.
				return nil, errorf(http.StatusConflict, "Conflict", "The simulator's device link %s is held by another VM's disk: %v", device, err)
			} else if err != nil {
				return nil, errorf(http.StatusInternalServerError, "InternalServerError", "attach: %v", err)
			}
			lun := strconv.Itoa(t.lun)
			_, _ = h.s.Update(name, t.disk.ID, func(d *sim.Resource) error {
				d.AttachedTo, d.Device, d.State = vm.ID, device, sim.StateInUse
				d.Extra[extraLUN], d.Extra[extraManagedBy] = lun, vm.Extra[extraID]
				return nil
			})
		}
		out = append(out, map[string]any{
			"lun": t.lun, "name": t.disk.Name, "createOption": "Attach", "caching": "None",
			"diskSizeGB": t.disk.SizeGB, "toBeDetached": false,
			"managedDisk": map[string]any{"id": t.disk.Extra[extraID]},
		})
	}
	for id, d := range attached {
		if !keep[id] {
			if e := h.detach(d); e != nil {
				return nil, e
			}
		}
	}
	return out, nil
}

func (h *server) detach(d sim.Resource) *armError {
	if err := h.s.DetachDisk(name, d.ID); err != nil {
		return errorf(http.StatusInternalServerError, "InternalServerError", "detach: %v", err)
	}
	_, _ = h.s.Update(name, d.ID, func(d *sim.Resource) error {
		d.AttachedTo, d.Device, d.State = "", "", sim.StateAvailable
		delete(d.Extra, extraLUN)
		delete(d.Extra, extraManagedBy)
		return nil
	})
	return nil
}

// deleteVM deletes a VM: its data disks are detached, its network interface
// and public IP address deleted, its sim VM halted. The caller holds p.mu.
func (p *provider) deleteVM(s *sim.Sim, vm sim.Resource, interrupted bool) error {
	h := &server{p: p, s: s}
	for _, d := range s.List(name, sim.KindVolume) {
		if live(d) && d.AttachedTo == vm.ID {
			if e := h.detach(d); e != nil {
				return e
			}
		}
	}
	for _, id := range []string{vm.Extra[extraNIC], vm.Extra[extraPublicIP]} {
		if id != "" {
			h.markDeleted(strings.ToLower(id))
		}
	}
	if interrupted {
		return s.Reclaim(name, vm.ID)
	}
	return s.Halt(name, vm.ID)
}

// provisioningState is the VM's properties.provisioningState.
func provisioningState(r sim.Resource) string {
	switch {
	case r.Extra[extraState] != "":
		return r.Extra[extraState]
	case r.State == sim.StatePending:
		return "Creating"
	case r.State == sim.StateStopping:
		return "Deleting"
	}
	return "Succeeded"
}

// vmView is the VM as Resource Manager returns it.
func (h *server) vmView(r *http.Request, res sim.Resource, instanceView, userData bool) map[string]any {
	b := bodyOf(res)
	b["id"], b["name"], b["type"], b["location"] = res.Extra[extraID], res.Name, typeVM, res.Region
	b["tags"] = res.Tags
	props := obj(b, "properties")
	props["vmId"] = res.ID
	props["provisioningState"] = provisioningState(res)
	props["timeCreated"] = res.CreatedAt.Format(time.RFC3339Nano)
	obj(props, "networkProfile")["networkInterfaces"] = []any{map[string]any{
		"id": res.Extra[extraNIC], "properties": map[string]any{"primary": true, "deleteOption": "Delete"},
	}}
	if instanceView {
		props["instanceView"] = vmInstanceView(res, h.s.Now())
	}
	if userData {
		props["userData"] = base64.StdEncoding.EncodeToString([]byte(res.UserData))
	}
	return b
}

// vmInstanceView serves .../virtualMachines/{vm}/instanceView.
func (h *server) vmInstanceView(w http.ResponseWriter, r *http.Request, id string) {
	res, ok := h.find(sim.KindInstance, id)
	if !ok {
		writeError(w, notFound(id))
		return
	}
	writeJSON(w, http.StatusOK, vmInstanceView(res, h.s.Now()))
}

// vmInstanceView is the VM's instance view: provisioning and power state
// (https://learn.microsoft.com/azure/virtual-machines/states-billing).
func vmInstanceView(res sim.Resource, at time.Time) map[string]any {
	now := at.UTC().Format(time.RFC3339Nano)
	var statuses []any
	if code := res.Extra[extraErrCode]; code != "" {
		statuses = append(statuses, map[string]any{
			"code": "ProvisioningState/failed/" + code, "level": "Error",
			"displayStatus": "Provisioning failed", "message": res.Extra[extraErrMsg], "time": now,
		})
	} else {
		ps := strings.ToLower(provisioningState(res))
		power := map[string]string{
			sim.StatePending: "starting", sim.StateRunning: "running", sim.StateStopping: "stopping",
		}[res.State]
		if power == "" {
			power = "deallocated"
		}
		statuses = append(statuses,
			map[string]any{"code": "ProvisioningState/" + ps, "level": "Info", "displayStatus": "Provisioning " + ps, "time": now},
			map[string]any{"code": "PowerState/" + power, "level": "Info", "displayStatus": "VM " + power},
		)
	}
	return map[string]any{
		"computerName": res.Name, "osName": "ubuntu", "hyperVGeneration": "V2", "statuses": statuses,
	}
}

// opURL is the absolute Azure-AsyncOperation URL of operation op.
func (h *server) opURL(r *http.Request, loc, op string) string {
	v := r.URL.Query().Get("api-version")
	return fmt.Sprintf("%s/subscriptions/%s/providers/Microsoft.Compute/locations/%s/operations/%s?api-version=%s",
		baseURL(r), SubscriptionID, loc, op, v)
}

// operationStatus answers a poll of an Azure-AsyncOperation URL: a create
// is InProgress until the VM runs, Failed when its allocation failed;
// updates and deletes are done at once.
func (h *server) operationStatus(w http.ResponseWriter, r *http.Request, op string) {
	kind, id, _ := strings.Cut(op, ".")
	status := map[string]any{"name": op, "status": "Succeeded", "startTime": h.s.Now().UTC().Format(time.RFC3339Nano)}
	if kind == "create" {
		res, ok := h.s.Get(name, id)
		switch {
		case !ok:
			writeError(w, errorf(http.StatusNotFound, "NotFound", "Operation %s not found.", op))
			return
		case res.Extra[extraErrCode] != "":
			status["status"] = "Failed"
			status["error"] = map[string]any{"code": res.Extra[extraErrCode], "message": res.Extra[extraErrMsg]}
		case res.State == sim.StatePending:
			status["status"] = "InProgress"
		}
	}
	writeJSON(w, http.StatusOK, status)
}

// disk serves /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Compute/disks/{d}
// (https://learn.microsoft.com/rest/api/compute/disks): empty disks only.
func (h *server) disk(w http.ResponseWriter, r *http.Request, rg, nm, id string, body map[string]any) {
	switch r.Method {
	case http.MethodGet:
		res, ok := h.find(sim.KindVolume, id)
		if !ok {
			writeError(w, notFound(id))
			return
		}
		writeJSON(w, http.StatusOK, diskView(res))
	case http.MethodPut, http.MethodPatch:
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		var req struct {
			Location   string            `json:"location"`
			Tags       map[string]string `json:"tags"`
			Properties struct {
				DiskSizeGB   int `json:"diskSizeGB"`
				CreationData struct {
					CreateOption string `json:"createOption"`
				} `json:"creationData"`
			} `json:"properties"`
		}
		if err := remarshal(body, &req); err != nil {
			writeError(w, errorf(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid: %v", err))
			return
		}
		if cur, ok := h.find(sim.KindVolume, id); ok {
			res, _ := h.s.Update(name, cur.ID, func(d *sim.Resource) error {
				if _, ok := body["tags"]; ok {
					d.Tags = req.Tags
				}
				if req.Properties.DiskSizeGB > d.SizeGB {
					d.SizeGB = req.Properties.DiskSizeGB
				}
				return nil
			})
			writeJSON(w, http.StatusOK, diskView(res))
			return
		}
		if r.Method == http.MethodPatch {
			writeError(w, notFound(id))
			return
		}
		loc := normLocation(req.Location)
		switch {
		case loc == "":
			writeError(w, errorf(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition."))
			return
		case !strings.EqualFold(req.Properties.CreationData.CreateOption, "Empty"):
			writeError(w, errorf(http.StatusBadRequest, "InvalidParameter", "The simulator creates empty disks only (creationData.createOption Empty)."))
			return
		case req.Properties.DiskSizeGB <= 0:
			writeError(w, errorf(http.StatusBadRequest, "InvalidParameter", "Required parameter 'diskSizeGB' is missing (null)."))
			return
		}
		res := sim.Resource{
			Provider: name, Kind: sim.KindVolume, ID: newGUID(), Name: nm, State: sim.StateAvailable,
			Region: loc, SizeGB: req.Properties.DiskSizeGB, Tags: req.Tags,
			Extra: map[string]string{extraARMID: strings.ToLower(id), extraID: id, extraType: typeDisk, extraRG: rg},
		}
		setBody(&res, body)
		res, err := h.s.Create(res)
		if err != nil {
			writeError(w, errorf(http.StatusInternalServerError, "InternalServerError", "%v", err))
			return
		}
		// A new disk is 202 Accepted with an operation to poll, as on Azure.
		w.Header().Set("Azure-AsyncOperation", h.opURL(r, loc, "disk."+res.ID))
		writeJSON(w, http.StatusAccepted, diskView(res))
	case http.MethodDelete:
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		res, ok := h.find(sim.KindVolume, id)
		if !ok {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if res.AttachedTo != "" {
			vm, _ := h.s.Get(name, res.AttachedTo)
			writeError(w, errorf(http.StatusConflict, "OperationNotAllowed", "Disk %s is attached to VM %s.", res.Name, vm.Extra[extraID]))
			return
		}
		if err := h.s.DeleteDisk(name, res.ID); err != nil {
			writeError(w, errorf(http.StatusInternalServerError, "InternalServerError", "%v", err))
			return
		}
		h.markDeleted(res.ID)
		w.WriteHeader(http.StatusOK)
	default:
		writeError(w, errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "%s is not allowed on disks.", r.Method))
	}
}

// diskView is the managed disk as Resource Manager returns it.
func diskView(res sim.Resource) map[string]any {
	b := bodyOf(res)
	b["id"], b["name"], b["type"], b["location"], b["tags"] = res.Extra[extraID], res.Name, typeDisk, res.Region, res.Tags
	props := obj(b, "properties")
	props["diskSizeGB"] = res.SizeGB
	props["diskSizeBytes"] = int64(res.SizeGB) << 30
	props["provisioningState"] = "Succeeded"
	props["uniqueId"] = res.ID
	props["timeCreated"] = res.CreatedAt.Format(time.RFC3339Nano)
	props["diskState"] = "Unattached"
	delete(b, "managedBy")
	if res.AttachedTo != "" {
		props["diskState"] = "Attached"
		b["managedBy"] = res.Extra[extraManagedBy]
	}
	return b
}
