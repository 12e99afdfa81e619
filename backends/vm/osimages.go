package vm

import "fmt"

// OSImages are a driver's os_images option: dstack's AWS os_images
// (src/dstack/_internal/core/backends/aws/models.py, AWSOSImageConfig), the
// image for CPU-only instances and the one for NVIDIA GPU instances, which
// the gcp and azure drivers accept in the same shape as a hoist extension.
type OSImages struct {
	CPU    *OSImage `json:"cpu"`
	NVIDIA *OSImage `json:"nvidia"`
}

// An OSImage is a boot image and the user hoist logs into it as. Name is
// what the provider finds the image by (an AMI name, wildcards allowed; a
// GCP image path; an Azure image id or URN); Owner is the AMI owner, for
// AWS only.
type OSImage struct {
	Name  string `json:"name"`
	Owner string `json:"owner"`
	User  string `json:"user"`
}

// Resolve returns the cpu and nvidia images to use: each one o gives (o may
// be nil) in place of the default of its kind. A given image needs a name
// and a user, and an owner when owner is true (AWS finds AMIs by name and
// owner); when owner is false a given owner is refused. Both images must
// have the same user, since the engine logs into every instance of a
// backend as one user (Config.User). Errors name the os_images key at fault.
func (o *OSImages) Resolve(cpu, nvidia OSImage, owner bool) (OSImage, OSImage, error) {
	if o != nil {
		for _, img := range []struct {
			key  string
			from *OSImage
			to   *OSImage
		}{{"cpu", o.CPU, &cpu}, {"nvidia", o.NVIDIA, &nvidia}} {
			if img.from == nil {
				continue
			}
			switch {
			case owner && (img.from.Name == "" || img.from.Owner == "" || img.from.User == ""):
				return OSImage{}, OSImage{}, fmt.Errorf("os_images.%s: name, owner and user are required", img.key)
			case !owner && (img.from.Name == "" || img.from.User == ""):
				return OSImage{}, OSImage{}, fmt.Errorf("os_images.%s: name and user are required", img.key)
			case !owner && img.from.Owner != "":
				return OSImage{}, OSImage{}, fmt.Errorf("os_images.%s.owner: not supported by this backend; name says which image", img.key)
			}
			*img.to = *img.from
		}
	}
	if cpu.User != nvidia.User {
		return OSImage{}, OSImage{}, fmt.Errorf("os_images: the cpu image's user %q and the nvidia image's user %q differ; hoist logs into every instance of a backend as one user", cpu.User, nvidia.User)
	}
	return cpu, nvidia, nil
}
