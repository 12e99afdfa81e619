package web

import "path"

// IDEURL is the deep link that opens a dev environment in its IDE over
// SSH, in dstack's form (dstack: src/dstack/_internal/server/services/ides/
// base.py and zed.py): vscode://vscode-remote/ssh-remote+<host><working
// dir>, the same with cursor:// and windsurf://, and zed://ssh/<host><working
// dir>. host is the SSH host `hoist attach` names after the run; workingDir
// is absolute. It is "" for an IDE without a link, or without a working dir.
func IDEURL(ide, host, workingDir string) string {
	if workingDir == "" || !path.IsAbs(workingDir) {
		return ""
	}
	switch ide {
	case "vscode", "cursor", "windsurf":
		return ide + "://vscode-remote/ssh-remote+" + host + workingDir
	case "zed":
		return "zed://ssh/" + host + workingDir
	}
	return ""
}
