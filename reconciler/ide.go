package reconciler

import (
	"fmt"
	"strings"

	"hoist/agents/api"
)

// ideServer is where a dev environment's IDE server comes from and where it
// goes when the spec pins its `version`, as dstack installs it (dstack:
// src/dstack/_internal/server/services/ides/vscode.py, cursor.py,
// windsurf.py). In both, {version} is the spec's version (for windsurf, the
// part before "@"), {commit} is windsurf's part after "@" (the version for
// the others), and {arch} is the instance's x64 or arm64.
type ideServer struct {
	downloadURL string
	installDir  string
}

// ideServers are the IDEs whose server hoist installs, with dstack's
// download URLs; Config.IDEDownloadURLs replaces them. Zed has none: it
// installs the server matching the client on first connect, and dstack
// installs nothing for it.
var ideServers = map[string]ideServer{
	"vscode": {
		downloadURL: "https://update.code.visualstudio.com/commit:{version}/server-linux-{arch}/stable",
		installDir:  ".vscode-server/bin/{version}",
	},
	"cursor": {
		downloadURL: "https://cursor.blob.core.windows.net/remote-releases/{version}/vscode-reh-linux-{arch}.tar.gz",
		installDir:  ".cursor-server/cli/servers/Stable-{version}/server",
	},
	"windsurf": {
		downloadURL: "https://windsurf-stable.codeiumdata.com/linux-reh-{arch}/stable/{commit}/windsurf-reh-linux-{arch}-{version}.tar.gz",
		installDir:  ".windsurf-server/bin/{commit}",
	},
}

// ideArch is the name the IDE servers' downloads give a Go architecture.
func ideArch(goarch string) (string, bool) {
	switch goarch {
	case "amd64":
		return "x64", true
	case "arm64":
		return "arm64", true
	}
	return "", false
}

// ideSpec is the IDE server a dev environment's runner installs: nil
// without `ide` and `version` (the IDE then installs its server on first
// connect, as in dstack). goarch is the instance's architecture.
func (c *Controller) ideSpec(spec runSpec, goarch string) (*api.IDESpec, error) {
	if spec.IDE == "" || spec.Version == "" {
		return nil, nil
	}
	srv, ok := ideServers[spec.IDE]
	if !ok {
		return nil, fmt.Errorf("hoist installs no %s server", spec.IDE)
	}
	if u := c.cfg.IDEDownloadURLs[spec.IDE]; u != "" {
		srv.downloadURL = u
	}
	arch, ok := ideArch(goarch)
	if !ok {
		return nil, fmt.Errorf("no %s server for the instance's architecture %q", spec.IDE, goarch)
	}
	version, commit := spec.Version, spec.Version
	if spec.IDE == "windsurf" {
		version, commit, _ = strings.Cut(spec.Version, "@")
	}
	r := strings.NewReplacer("{version}", version, "{commit}", commit, "{arch}", arch)
	return &api.IDESpec{Name: spec.IDE, Version: spec.Version, DownloadURL: r.Replace(srv.downloadURL), InstallDir: r.Replace(srv.installDir)}, nil
}
