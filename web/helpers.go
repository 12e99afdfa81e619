package web

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"

	"hoist/backends/offers"
	"hoist/reconciler/source"
)

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(l) > 100 {
		l = l[:100] + "…"
	}
	return l
}

func optInt(p *int) string {
	if p == nil {
		return "∞"
	}
	return strconv.Itoa(*p)
}

func spotLabel(spot, onDemand bool) string {
	switch {
	case spot && onDemand:
		return "spot + on-demand"
	case spot:
		return "spot"
	default:
		return "on-demand"
	}
}

func offerResources(o offers.Offer) string {
	var parts []string
	parts = append(parts, fmt.Sprintf("%dxCPU", o.CPUs), strconv.FormatFloat(o.MemoryGB, 'f', -1, 64)+"GB")
	if o.GPUCount > 0 {
		g := fmt.Sprintf("%dx%s", o.GPUCount, o.GPUName)
		if o.GPUMemoryGB > 0 {
			g += " (" + strconv.FormatFloat(o.GPUMemoryGB, 'f', -1, 64) + "GB)"
		}
		parts = append(parts, g)
	}
	if o.DiskGB > 0 {
		parts = append(parts, strconv.FormatFloat(o.DiskGB, 'f', -1, 64)+"GB (disk)")
	}
	return strings.Join(parts, ", ")
}

func revisionResult(r Revision) string {
	switch {
	case !r.Valid:
		return "rejected"
	case r.Applied:
		return "applied"
	default:
		return "valid"
	}
}

// previousValid returns the sha of the next older valid revision after
// index i (revisions are newest first).
func previousValid(rs []Revision, i int) string {
	for _, r := range rs[i+1:] {
		if r.Valid {
			return r.SHA
		}
	}
	return ""
}

func diffClass(op string) string {
	switch op {
	case "+":
		return "add"
	case "-":
		return "del"
	}
	return "ctx"
}

// errPos matches the "path:line:col: message" form of validation errors.
var errPos = regexp.MustCompile(`^([^:\s]+):(\d+):(\d+): `)

// errorLink links a validation error of the latest revision to its file in
// the repository's web view, when the repository is on a known forge.
func errorLink(st SyncStatus, e string) string {
	return errorLinkAt(st, st.LatestRevision, e)
}

// errorLinkAt links a validation error of revision sha to its file.
func errorLinkAt(st SyncStatus, sha, e string) string {
	m := errPos.FindStringSubmatch(e)
	if m == nil || sha == "" {
		return ""
	}
	base, ok := forgeBase(st.Repo)
	if !ok {
		return ""
	}
	file := path.Join(st.Path, m[1])
	if strings.Contains(base, "gitlab") {
		return fmt.Sprintf("%s/-/blob/%s/%s#L%s", base, sha, file, m[2])
	}
	return fmt.Sprintf("%s/blob/%s/%s#L%s", base, sha, file, m[2])
}

// forgeBase turns a clone URL into the repository's https web URL.
func forgeBase(repo string) (string, bool) {
	if rest, ok := strings.CutPrefix(repo, "git@"); ok { // git@github.com:o/r.git
		host, p, ok := strings.Cut(rest, ":")
		if !ok {
			return "", false
		}
		repo = "https://" + host + "/" + p
	}
	u, err := url.Parse(repo)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", false
	}
	u.User = nil
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), ".git")
	u.RawQuery, u.Fragment = "", ""
	return u.String(), true
}

// shortID abbreviates an object id. UUIDv7 ids begin with a timestamp, so
// the distinctive part is the end.
func shortID(id string) string {
	if len(id) == 36 && strings.Count(id, "-") == 4 {
		return id[len(id)-8:]
	}
	return source.ShortID(id)
}

// pageURL is /runs with the filters of f on page n.
func pageURL(f RunFilter, n int) string {
	q := url.Values{}
	for k, v := range map[string]string{"status": f.Status, "type": f.Type, "fleet": f.Fleet} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if n > 1 {
		q.Set("page", strconv.Itoa(n))
	}
	if len(q) == 0 {
		return "/runs"
	}
	return "/runs?" + q.Encode()
}

func int64Param(c *echo.Context, name string, def int64) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, echo.NewHTTPError(http.StatusBadRequest, name+" must be a non-negative integer")
	}
	return n, nil
}

func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

func money(v float64) string {
	if v == 0 {
		return "—"
	}
	return "$" + strconv.FormatFloat(v, 'f', 3, 64)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return fmtTime(*t)
}

func exitCode(c *int) string {
	if c == nil {
		return ""
	}
	return strconv.Itoa(*c)
}

// age renders how long before now t was.
func age(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return humanDuration(now.Sub(t))
}

func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	default:
		return strconv.Itoa(int(d.Hours()/24)) + "d"
	}
}
