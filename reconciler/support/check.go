package support

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"hoist/schema"
)

// RefusedPrefix starts the message of every error Check reports.
const RefusedPrefix = "not supported yet by hoist: "

// Check reports every use in r of what hoist's runtime does not support
// (Refused rows, and the refused values of Partial rows), each at its field
// as "<path>: not supported yet by hoist: <what>". It has the signature of
// reconciler.Check; any error rejects the revision.
func Check(r *schema.Resource) schema.Errors {
	return report(r, func(d Decision) bool { return d == Refused || d == Partial }, RefusedPrefix)
}

// CodePaths reports every local path of r's `repos` and `files` that does
// not name a path of the spec repository: an absolute path, or one that
// leaves the repository once resolved against the directory of the spec
// file (dstack resolves local paths against the configuration file's
// directory; hoist reads them from the repository at the applied commit).
// r's position names its file relative to the repository root, as in a
// revision the server loads; it has the signature of reconciler.Check.
func CodePaths(r *schema.Resource) schema.Errors { return CodePathsAt(r, r.Pos.File) }

// CodePathsAt is CodePaths for a resource whose spec file is file (a slash
// path relative to the repository root), for callers that loaded it from
// elsewhere (`hoist validate` of a path in a Git work tree).
func CodePathsAt(r *schema.Resource, file string) schema.Errors {
	c := r.RunConfig()
	if c == nil {
		return nil
	}
	base := path.Dir(filepath.ToSlash(file))
	inRepo := func(local string) bool {
		return !path.IsAbs(local) && !filepath.IsAbs(local) && fs.ValidPath(path.Join(base, filepath.ToSlash(local)))
	}
	var out schema.Errors
	for i, repo := range c.Repos {
		if repo.URL == "" && !inRepo(repo.LocalPath) {
			out = append(out, r.FieldError(fmt.Sprintf("repos[%d]", i), "%q is outside the spec repository", repo.LocalPath))
		}
		if msg := repoURLProblem(repo.URL); msg != "" {
			out = append(out, r.FieldError(fmt.Sprintf("repos[%d].url", i), "%s", msg))
		}
	}
	for i, f := range c.Files {
		if !inRepo(f.LocalPath) {
			out = append(out, r.FieldError(fmt.Sprintf("files[%d]", i), "%q is outside the spec repository", f.LocalPath))
		}
	}
	return out
}

// repoURLProblem says what is wrong with a `repos[].url` ("" = nothing):
// the server fetches https, http, ssh (or scp-like user@host:path) and git
// URLs, with credentials from the project's secrets only, never from the
// spec file.
func repoURLProblem(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if raw == "" || !ok {
		return ""
	}
	switch strings.ToLower(scheme) {
	case "https", "http", "ssh", "git":
	default:
		return fmt.Sprintf("%s urls are not fetched; use https, http, ssh or git", scheme)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "not a url: " + strings.ReplaceAll(err.Error(), raw, scheme+"://"+redactUserinfo(rest))
	}
	if _, has := u.User.Password(); has {
		return "credentials in `url` are not accepted: set the token as the project secret HOIST_GIT_TOKEN (or HOIST_GIT_TOKEN_<HOST>)"
	}
	return ""
}

// redactUserinfo hides what precedes "@" in the authority of a URL's rest.
func redactUserinfo(rest string) string {
	host, _, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(host, "@"); i >= 0 {
		return "***" + rest[i:]
	}
	return rest
}

// Warnings reports every use in r of a field that has no effect in hoist
// (Advisory rows), each at its field as "<path>: <what>". Warnings never
// reject a revision.
func Warnings(r *schema.Resource) schema.Errors {
	return report(r, func(d Decision) bool { return d == Advisory }, "")
}

// CheckAll applies Check to every resource of d, and GatewayRefs to d;
// WarningsAll, Warnings. Both return their findings sorted by file and
// position.
func CheckAll(d *schema.Desired) schema.Errors {
	errs := append(all(d, Check), GatewayRefs(d)...)
	errs.Sort()
	return errs
}

// WarningsAll applies Warnings to every resource of d, sorted by position.
func WarningsAll(d *schema.Desired) schema.Errors { return all(d, Warnings) }

func all(d *schema.Desired, f func(*schema.Resource) schema.Errors) schema.Errors {
	if d == nil {
		return nil
	}
	var out schema.Errors
	for i := range d.Resources {
		out = append(out, f(&d.Resources[i])...)
	}
	out.Sort()
	return out
}

func report(r *schema.Resource, pick func(Decision) bool, prefix string) schema.Errors {
	var out schema.Errors
	for _, row := range Table {
		if row.uses == nil || !pick(row.Decision) || !slices.Contains(row.Kinds, r.Kind) {
			continue
		}
		for _, p := range row.uses(r) {
			out = append(out, r.FieldError(p, "%s%s", prefix, row.Note))
		}
	}
	out.Sort()
	return out
}

// Lookup returns the row deciding field (schema form, e.g.
// "volumes[].name") of kind k: its own row, or the row of its nearest
// ancestor, or the kind's whole-resource row.
func Lookup(k schema.Kind, field string) (Row, bool) {
	for f := field; ; f = parentPath(f) {
		for _, row := range Table {
			if row.Field == f && slices.Contains(row.Kinds, k) {
				return row, true
			}
		}
		if f == "" {
			return Row{}, false
		}
	}
}
