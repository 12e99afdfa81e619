package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hoist/backends"
)

// Volume statuses (backends.Volume.Status).
const (
	volumeAvailable = "available"
	volumeInUse     = "in-use"
	volumeDeleting  = "deleting"
	volumeLost      = "lost"
)

// A volumeRecord is what the driver keeps of a volume in backends.Records
// (under the backend's name + volumeRecordSuffix): the claim, whether hoist
// created it, and the instances it is attached to (a claim needs no
// attaching: the record only says which instances' pods may mount it).
type volumeRecord struct {
	// ID is hoist's volume id.
	ID string `json:"id"`
	// Claim is the PersistentVolumeClaim's name in the namespace.
	Claim string `json:"claim"`
	// Owned is false for a claim registered by claim_name: deleting the
	// volume forgets it and leaves the claim.
	Owned bool `json:"owned"`
	// Tags are the ownership tags.
	Tags map[string]string `json:"tags"`
	// Attached lists the instances the volume is attached to.
	Attached []string `json:"attached,omitempty"`
}

// volumeRecordSuffix makes the records key of volumes: records of
// instances are under the backend's name.
const volumeRecordSuffix = ".volumes"

func (b *Backend) volumeKey() string { return b.name + volumeRecordSuffix }

// accessModes are the PersistentVolumeClaim access modes
// (https://kubernetes.io/docs/concepts/storage/persistent-volumes/#access-modes).
var accessModes = []corev1.PersistentVolumeAccessMode{
	corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod,
}

// claimName returns the name of the claim hoist creates for volume id:
// dstack-like, "hoist-<name>-<8 hex of the id>", a DNS label.
func claimName(name, id string) string {
	sum := sha256.Sum256([]byte(id))
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, name)
	clean = strings.Trim(clean, "-")
	if len(clean) > 40 {
		clean = strings.TrimRight(clean[:40], "-")
	}
	if clean == "" {
		return "hoist-" + hex.EncodeToString(sum[:4])
	}
	return "hoist-" + clean + "-" + hex.EncodeToString(sum[:4])
}

// volumeRecord returns the record of volume id; ok is false when there is
// none.
func (b *Backend) volumeRecord(ctx context.Context, id string) (volumeRecord, bool, error) {
	raw, ok, err := b.records.GetBackendRecord(ctx, b.volumeKey(), id)
	if err != nil {
		return volumeRecord{}, false, backends.Transient(fmt.Errorf("kubernetes backend %q: volume record %s: %w", b.name, id, err))
	}
	if !ok {
		return volumeRecord{}, false, nil
	}
	var r volumeRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return volumeRecord{}, false, fmt.Errorf("kubernetes backend %q: volume record %s: %w", b.name, id, err)
	}
	return r, true, nil
}

func (b *Backend) putVolumeRecord(ctx context.Context, r volumeRecord) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := b.records.PutBackendRecord(ctx, b.volumeKey(), r.ID, raw); err != nil {
		return backends.Transient(fmt.Errorf("kubernetes backend %q: volume record %s: %w", b.name, r.ID, err))
	}
	return nil
}

// CreateVolume creates a PersistentVolumeClaim of spec.SizeGB GiB
// (spec.AccessModes, default ReadWriteOnce; spec.StorageClass, default the
// cluster's), labelled with spec.Tags and hoist.volume, as dstack does
// (core/backends/kubernetes/compute.py). It is idempotent on spec.ID.
func (b *Backend) CreateVolume(ctx context.Context, spec backends.VolumeSpec) (backends.Volume, error) {
	if spec.ID == "" {
		return backends.Volume{}, backends.Stalled(errors.New("kubernetes backend: volume id is required"))
	}
	if spec.SizeGB <= 0 {
		return backends.Volume{}, backends.Stalled(fmt.Errorf("kubernetes backend %q: volume %s: size is required to create a claim", b.name, spec.Name))
	}
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	if len(spec.AccessModes) > 0 {
		modes = modes[:0]
		for _, m := range spec.AccessModes {
			if !slices.Contains(accessModes, corev1.PersistentVolumeAccessMode(m)) {
				return backends.Volume{}, backends.Stalled(fmt.Errorf("kubernetes backend %q: volume %s: access mode %q: want one of %v", b.name, spec.Name, m, accessModes))
			}
			modes = append(modes, corev1.PersistentVolumeAccessMode(m))
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ensureNamespace(ctx); err != nil {
		return backends.Volume{}, err
	}
	tags := backends.CopyTags(spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[backends.TagVolume] = spec.ID
	name := claimName(spec.Name, spec.ID)
	pvcs := b.c.client.CoreV1().PersistentVolumeClaims(b.c.namespace)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: tagLabels(tags), Annotations: tagAnnotations(tags)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: modes,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: quantityGiB(spec.SizeGB),
			}},
		},
	}
	if spec.StorageClass != "" {
		pvc.Spec.StorageClassName = &spec.StorageClass
	}
	got, err := pvcs.Create(ctx, pvc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = pvcs.Get(ctx, name, metav1.GetOptions{})
		if err == nil && tagsOf(got.Annotations, got.Labels)[backends.TagVolume] != spec.ID {
			return backends.Volume{}, backends.Stalled(fmt.Errorf("kubernetes backend %q: claim %s exists and is not volume %s's", b.name, name, spec.ID))
		}
	}
	if err != nil {
		return backends.Volume{}, b.apiError("create claim "+name, err)
	}
	r := volumeRecord{ID: spec.ID, Claim: name, Owned: true, Tags: tags}
	if old, ok, err := b.volumeRecord(ctx, spec.ID); err != nil {
		return backends.Volume{}, err
	} else if ok {
		r.Attached = old.Attached
	}
	if err := b.putVolumeRecord(ctx, r); err != nil {
		return backends.Volume{}, err
	}
	b.log.Info("volume_created", "volume", spec.ID, "claim", name, "size_gb", spec.SizeGB)
	return b.volume(r, got), nil
}

// RegisterVolume adopts the existing claim named spec.ExternalID (dstack's
// claim_name) without owning it. A claim that does not exist needs the
// user.
func (b *Backend) RegisterVolume(ctx context.Context, spec backends.VolumeSpec) (backends.Volume, error) {
	if spec.ID == "" || spec.ExternalID == "" {
		return backends.Volume{}, backends.Stalled(errors.New("kubernetes backend: volume id and claim name are required"))
	}
	got, err := b.c.client.CoreV1().PersistentVolumeClaims(b.c.namespace).Get(ctx, spec.ExternalID, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return backends.Volume{}, backends.Stalled(fmt.Errorf("kubernetes backend %q: claim %q not found in namespace %s", b.name, spec.ExternalID, b.c.namespace))
	}
	if err != nil {
		return backends.Volume{}, b.apiError("claim "+spec.ExternalID, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := volumeRecord{ID: spec.ID, Claim: spec.ExternalID, Tags: backends.CopyTags(spec.Tags)}
	if old, ok, err := b.volumeRecord(ctx, spec.ID); err != nil {
		return backends.Volume{}, err
	} else if ok {
		r.Attached = old.Attached
	}
	if err := b.putVolumeRecord(ctx, r); err != nil {
		return backends.Volume{}, err
	}
	return b.volume(r, got), nil
}

// volume describes the volume of record r whose claim is pvc.
func (b *Backend) volume(r volumeRecord, pvc *corev1.PersistentVolumeClaim) backends.Volume {
	v := backends.Volume{
		ID: r.ID, ProviderID: pvc.Name, Region: b.c.region, SizeGB: claimSizeGB(pvc), Owned: r.Owned,
		Tags: backends.CopyTags(r.Tags), CreatedAt: pvc.CreationTimestamp.Time, Status: claimStatus(pvc),
	}
	if v.Status == volumeAvailable && len(r.Attached) > 0 {
		v.Status = volumeInUse
	}
	return v
}

// claimSizeGB is the claim's size in GiB: its capacity once bound, else
// its request (dstack's rule).
func claimSizeGB(pvc *corev1.PersistentVolumeClaim) float64 {
	q, ok := pvc.Status.Capacity[corev1.ResourceStorage]
	if !ok {
		q = pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	}
	return math.Round(float64(q.Value())/(1<<30)*100) / 100
}

// claimStatus maps a claim's phase: a pending claim is available, since a
// pod may mount it (its volume is bound when the pod is scheduled, for a
// storage class that waits for the first consumer).
func claimStatus(pvc *corev1.PersistentVolumeClaim) string {
	switch {
	case pvc.DeletionTimestamp != nil:
		return volumeDeleting
	case pvc.Status.Phase == corev1.ClaimLost:
		return volumeLost
	}
	return volumeAvailable
}

// ownedClaim finds the claim hoist created for volume id by its
// hoist.volume label (a volume without a record: a leak).
func (b *Backend) ownedClaim(ctx context.Context, id string) (*corev1.PersistentVolumeClaim, error) {
	list, err := b.c.client.CoreV1().PersistentVolumeClaims(b.c.namespace).List(ctx, metav1.ListOptions{
		LabelSelector: tagSelector(map[string]string{backends.TagVolume: id}),
	})
	if err != nil {
		return nil, b.apiError("list claims", err)
	}
	for i := range list.Items {
		if tagsOf(list.Items[i].Annotations, list.Items[i].Labels)[backends.TagVolume] == id {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// DescribeVolume observes volume id through its claim; ErrNotFound when
// the claim (or any record of the volume) is gone.
func (b *Backend) DescribeVolume(ctx context.Context, id string) (backends.Volume, error) {
	r, ok, err := b.volumeRecord(ctx, id)
	if err != nil {
		return backends.Volume{}, err
	}
	if !ok {
		pvc, err := b.ownedClaim(ctx, id)
		if err != nil {
			return backends.Volume{}, err
		}
		if pvc == nil {
			return backends.Volume{}, fmt.Errorf("kubernetes backend %q: volume %s: %w", b.name, id, backends.ErrNotFound)
		}
		t := tagsOf(pvc.Annotations, pvc.Labels)
		return b.volume(volumeRecord{ID: id, Claim: pvc.Name, Owned: true, Tags: t}, pvc), nil
	}
	pvc, err := b.c.client.CoreV1().PersistentVolumeClaims(b.c.namespace).Get(ctx, r.Claim, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return backends.Volume{}, fmt.Errorf("kubernetes backend %q: volume %s: claim %s: %w", b.name, id, r.Claim, backends.ErrNotFound)
	}
	if err != nil {
		return backends.Volume{}, b.apiError("claim "+r.Claim, err)
	}
	return b.volume(r, pvc), nil
}

// AttachVolume checks that the volume's claim exists and records that
// instanceID's pods may mount it: the attachment names the claim, which
// the pod shim mounts into the task's pod.
func (b *Backend) AttachVolume(ctx context.Context, volumeID, instanceID string) (backends.VolumeAttachment, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok, err := b.volumeRecord(ctx, volumeID)
	if err != nil {
		return backends.VolumeAttachment{}, err
	}
	if !ok {
		return backends.VolumeAttachment{}, fmt.Errorf("kubernetes backend %q: volume %s: %w", b.name, volumeID, backends.ErrNotFound)
	}
	if _, ok, err := b.record(ctx, instanceID); err != nil {
		return backends.VolumeAttachment{}, backends.Transient(err)
	} else if !ok {
		return backends.VolumeAttachment{}, fmt.Errorf("kubernetes backend %q: instance %s: %w", b.name, instanceID, backends.ErrNotFound)
	}
	pvc, err := b.c.client.CoreV1().PersistentVolumeClaims(b.c.namespace).Get(ctx, r.Claim, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return backends.VolumeAttachment{}, backends.Stalled(fmt.Errorf("kubernetes backend %q: volume %s: claim %s not found in namespace %s", b.name, volumeID, r.Claim, b.c.namespace))
	}
	if err != nil {
		return backends.VolumeAttachment{}, b.apiError("claim "+r.Claim, err)
	}
	if pvc.DeletionTimestamp != nil {
		return backends.VolumeAttachment{}, backends.Stalled(fmt.Errorf("kubernetes backend %q: volume %s: claim %s is being deleted", b.name, volumeID, r.Claim))
	}
	if !slices.Contains(r.Attached, instanceID) {
		r.Attached = append(r.Attached, instanceID)
		if err := b.putVolumeRecord(ctx, r); err != nil {
			return backends.VolumeAttachment{}, err
		}
	}
	return backends.VolumeAttachment{Claim: r.Claim}, nil
}

// DetachVolume forgets that instanceID's pods may mount the volume;
// detached (or gone) is success. The claim itself is released when the
// task's pod is deleted.
func (b *Backend) DetachVolume(ctx context.Context, volumeID, instanceID string, _ bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok, err := b.volumeRecord(ctx, volumeID)
	if err != nil || !ok {
		return err
	}
	if i := slices.Index(r.Attached, instanceID); i >= 0 {
		r.Attached = slices.Delete(r.Attached, i, i+1)
		return b.putVolumeRecord(ctx, r)
	}
	return nil
}

// DeleteVolume deletes an owned volume's claim (a registered one is only
// forgotten). While the claim is still there (Kubernetes keeps a claim a
// pod uses until the pod is gone) it returns ErrNotYetTerminated
// (KindWait); gone is success. A volume without a record is found by its
// hoist.volume label.
func (b *Backend) DeleteVolume(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok, err := b.volumeRecord(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		pvc, err := b.ownedClaim(ctx, id)
		if err != nil || pvc == nil {
			return err
		}
		r = volumeRecord{ID: id, Claim: pvc.Name, Owned: true}
	}
	if r.Owned {
		pvcs := b.c.client.CoreV1().PersistentVolumeClaims(b.c.namespace)
		err := pvcs.Delete(ctx, r.Claim, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return b.apiError("delete claim "+r.Claim, err)
		}
		if _, err := pvcs.Get(ctx, r.Claim, metav1.GetOptions{}); err == nil {
			return backends.Wait(fmt.Errorf("kubernetes backend %q: volume %s: claim %s still in use: %w", b.name, id, r.Claim, backends.ErrNotYetTerminated), 2*time.Second)
		} else if !apierrors.IsNotFound(err) {
			return b.apiError("claim "+r.Claim, err)
		}
		b.log.Info("volume_deleted", "volume", id, "claim", r.Claim)
	}
	if err := b.records.DeleteBackendRecord(ctx, b.volumeKey(), id); err != nil {
		return backends.Transient(fmt.Errorf("kubernetes backend %q: volume record %s: %w", b.name, id, err))
	}
	return nil
}

// ListVolumes returns the claims hoist created that carry all of tags (the
// leak audit), whatever the records say; registered claims carry no
// hoist.volume label and are never listed.
func (b *Backend) ListVolumes(ctx context.Context, tags map[string]string) ([]backends.Volume, error) {
	want := maps.Clone(tags)
	if want == nil {
		want = map[string]string{}
	}
	list, err := b.c.client.CoreV1().PersistentVolumeClaims(b.c.namespace).List(ctx, metav1.ListOptions{LabelSelector: tagSelector(want)})
	if err != nil {
		return nil, b.apiError("list claims", err)
	}
	var out []backends.Volume
	for i := range list.Items {
		pvc := &list.Items[i]
		t := tagsOf(pvc.Annotations, pvc.Labels)
		id := t[backends.TagVolume]
		if id == "" || !backends.MatchTags(t, tags) {
			continue
		}
		r, ok, err := b.volumeRecord(ctx, id)
		if err != nil {
			return nil, err
		}
		if !ok {
			r = volumeRecord{ID: id, Claim: pvc.Name}
		}
		r.Owned, r.Tags = true, t
		out = append(out, b.volume(r, pvc))
	}
	slices.SortFunc(out, func(a, b backends.Volume) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
