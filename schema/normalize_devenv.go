package schema

import (
	"regexp"
)

func (d *dec) devEnvironment(n *node) *DevEnvironment {
	e := &DevEnvironment{RunConfig: d.runConfig(n, KindDevEnvironment)}
	e.Ports = d.ports(n.get("ports"), "ports")
	if v := n.get("ide"); !v.isNull() {
		e.IDE, _ = d.enum(v, "ide", valuesAt("#DevEnvironment.ide")...)
	}
	if v := n.get("version"); !v.isNull() {
		e.Version, _ = d.str(v, "version")
		if e.Version != "" && n.get("ide").isNull() {
			d.errf(v, "version", "`version` requires `ide` to be set")
		}
		if e.IDE == "windsurf" && e.Version != "" && !regexp.MustCompile(`^.+@[a-f0-9]+$`).MatchString(e.Version) {
			d.errf(v, "version", "invalid Windsurf version format: `%s`; expected `version@commit`", e.Version)
		}
	}
	e.Init = d.commands(n.get("init"), "init")
	if v := n.get("inactivity_duration"); !v.isNull() {
		x := d.offDuration(v, "inactivity_duration", 0)
		if x > 0 {
			e.InactivityDuration = x
		}
		if x >= 0 && e.Dstack && !(v.kind == nBool && v.b) {
			d.errf(v, "inactivity_duration", "`dstack` is not supported together with `inactivity_duration`")
		}
	}
	if v := n.get("entrypoint"); !v.isNull() {
		d.errf(v, "entrypoint", "entrypoint is not supported for dev-environment")
	}
	inferGPUVendor(&e.Resources.GPU, e.Image, e.Docker)
	d.checkImageCompat(resourcesAt(n, "gpu"), resourcesAt(n, "cpu"), "resources", e.Resources, e.Image, e.Docker)
	d.checkEnvGroupsRefs(n.get("env"), e.Env)
	cmds, paths := commandNodes(n.get("init"), "init")
	d.checkGroupsRefs(cmds, paths, "", nil)
	d.checkEnvInterpolation(n, e.Env)
	return e
}
