package schema

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// jobVarRE matches the references dstack resolves per job in a network
// volume's name: `${{ dstack.job_num }}` and its alias
// `${{ dstack.node_rank }}` (server/services/jobs/configurators/base.py,
// interpolate_job_volumes), for per-node volumes of a multi-node task.
var jobVarRE = regexp.MustCompile(`\$\{\{\s*dstack\.(?:job_num|node_rank)\s*\}\}`)

// JobVolumeName returns network volume name as job jobNum of a run mounts
// it: its `${{ dstack.job_num }}` and `${{ dstack.node_rank }}` replaced
// by jobNum.
func JobVolumeName(name string, jobNum int) string {
	if !strings.Contains(name, "${{") {
		return name
	}
	return jobVarRE.ReplaceAllLiteralString(name, strconv.Itoa(jobNum))
}

// checkVolumeNameRefs refuses a network volume name with a `$` other than
// in `${{ dstack.job_num }}` and `${{ dstack.node_rank }}`: dstack
// interpolates nothing else there, and no volume name holds one.
func checkVolumeNameRefs(name string) error {
	rest := jobVarRE.ReplaceAllLiteralString(name, "0")
	if !strings.Contains(rest, "$") {
		return nil
	}
	return fmt.Errorf("volume name %q: only ${{ dstack.job_num }} and ${{ dstack.node_rank }} are interpolated in volume names", name)
}
