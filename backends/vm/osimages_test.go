package vm

import (
	"strings"
	"testing"
)

func TestOSImagesResolve(t *testing.T) {
	defCPU, defGPU := OSImage{Name: "c", Owner: "o", User: "ubuntu"}, OSImage{Name: "g", Owner: "o", User: "ubuntu"}
	cases := []struct {
		name  string
		o     *OSImages
		owner bool
		want  string // error substring; "" for success
		user  string
	}{
		{name: "defaults", o: nil, owner: true, user: "ubuntu"},
		{name: "both given", o: &OSImages{CPU: &OSImage{Name: "a", User: "root"}, NVIDIA: &OSImage{Name: "b", User: "root"}}, user: "root"},
		{name: "users differ", o: &OSImages{CPU: &OSImage{Name: "a", User: "root"}}, want: `the cpu image's user "root" and the nvidia image's user "ubuntu" differ`},
		{name: "no user", o: &OSImages{NVIDIA: &OSImage{Name: "a"}}, want: "os_images.nvidia: name and user are required"},
		{name: "owner required", o: &OSImages{CPU: &OSImage{Name: "a", User: "ubuntu"}}, owner: true, want: "os_images.cpu: name, owner and user are required"},
		{name: "owner refused", o: &OSImages{CPU: &OSImage{Name: "a", Owner: "1", User: "ubuntu"}}, want: "os_images.cpu.owner"},
	}
	for _, c := range cases {
		cpu, gpu, err := c.o.Resolve(defCPU, defGPU, c.owner)
		switch {
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: Resolve: %v, want an error with %q", c.name, err, c.want)
		case c.want == "" && (err != nil || cpu.User != c.user || gpu.User != c.user):
			t.Errorf("%s: Resolve = %+v, %+v, %v; want user %q", c.name, cpu, gpu, err, c.user)
		}
	}
}
