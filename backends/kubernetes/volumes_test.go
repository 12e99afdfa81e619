package kubernetes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestClaimName_isADNSLabelStableForTheID(t *testing.T) {
	tests := []struct {
		name, volume, id string
	}{
		{"a plain name", "data", "vol-1"},
		{"upper case and underscores", "My_Data", "vol-2"},
		{"a long name is cut", "a-very-long-volume-name-that-goes-on-and-on-and-on-and-on", "vol-3"},
		{"no usable character", "___", "vol-4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := claimName(tt.volume, tt.id)
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("claimName(%q, %q) = %q: %v", tt.volume, tt.id, got, errs)
			}
			if again := claimName(tt.volume, tt.id); again != got {
				t.Errorf("claimName is not stable: %q, then %q", got, again)
			}
			if other := claimName(tt.volume, tt.id+"x"); other == got {
				t.Errorf("two volume ids share the claim name %q", got)
			}
		})
	}
}

func TestClaimStatusAndSize(t *testing.T) {
	now := metav1.Now()
	req := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1536Mi")}}
	tests := []struct {
		name   string
		pvc    corev1.PersistentVolumeClaim
		status string
		sizeGB float64
	}{
		{"a pending claim is available at its request's size",
			corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{Resources: req}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}},
			volumeAvailable, 1.5},
		{"a bound claim has its capacity's size",
			corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{Resources: req}, Status: corev1.PersistentVolumeClaimStatus{
				Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}},
			volumeAvailable, 2},
		{"a claim being deleted is deleting",
			corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: corev1.PersistentVolumeClaimSpec{Resources: req}},
			volumeDeleting, 1.5},
		{"a lost claim is lost",
			corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{Resources: req}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimLost}},
			volumeLost, 1.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := claimStatus(&tt.pvc); got != tt.status {
				t.Errorf("claimStatus = %q, want %q", got, tt.status)
			}
			if got := claimSizeGB(&tt.pvc); got != tt.sizeGB {
				t.Errorf("claimSizeGB = %v, want %v", got, tt.sizeGB)
			}
		})
	}
}

func TestQuantityGiB(t *testing.T) {
	for gb, want := range map[float64]string{1: "1Gi", 1.5: "1536Mi", 100: "100Gi"} {
		q := quantityGiB(gb)
		if q.String() != want {
			t.Errorf("quantityGiB(%v) = %s, want %s", gb, q.String(), want)
		}
	}
}
