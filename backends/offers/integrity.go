package offers

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// regionPatterns are the shapes of region (or zone) names per provider
// that the integrity check accepts. Providers without an entry (vast.ai
// free-text locations, marketplaces) only need a non-empty, trimmed name.
var regionPatterns = map[string]*regexp.Regexp{
	"aws":        regexp.MustCompile(`^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d+(-[a-z0-9]+)*$`),
	"azure":      regexp.MustCompile(`^[a-z][a-z0-9]+$`),
	"gcp":        regexp.MustCompile(`^[a-z]+-[a-z]+\d+(-[a-z])?$`),
	"lambda":     regexp.MustCompile(`^[a-z]+-[a-z]+-\d+$`),
	"oci":        regexp.MustCompile(`^[a-z]{2}-[a-z]+-\d+$`),
	"verda":      regexp.MustCompile(`^[A-Z]{3}-\d{2}$`),
	"nebius":     regexp.MustCompile(`^[a-z]+-[a-z]+\d+$`),
	"hyperstack": regexp.MustCompile(`^[A-Z]+-\d+$`),
	"jarvislabs": regexp.MustCompile(`^[A-Z]+\d+$`),
	"cudo":       regexp.MustCompile(`^[a-z]{2}-[a-z]+-\d+$`),
	"mithril":    regexp.MustCompile(`^[a-z]+-[a-z]+\d+-[a-z]$`),
}

// maxSkippedShare is the share of malformed rows above which a table is
// considered the wrong file rather than a catalog with a few bad rows
// (which are skipped with a warning).
const maxSkippedShare = 0.5

// IntegrityError lists everything wrong with one provider table.
type IntegrityError struct {
	// Provider is the table's provider.
	Provider string
	// Problems holds one message per failed check (at most a few per check).
	Problems []string
}

// Error implements error.
func (e *IntegrityError) Error() string {
	return fmt.Sprintf("catalog %s fails integrity checks: %s", e.Provider, strings.Join(e.Problems, "; "))
}

// ErrIntegrity is matched by every *IntegrityError (errors.Is).
var ErrIntegrity = errors.New("catalog integrity")

// Is makes errors.Is(err, ErrIntegrity) true.
func (e *IntegrityError) Is(target error) bool { return target == ErrIntegrity }

// CheckTable runs gpuhunt's catalog integrity checks on a table as read
// (before normalization): the table is non-empty and not mostly malformed
// (a few malformed rows are merely skipped); every row has an instance
// name and a location of the provider's shape, a
// positive price, CPU count and memory, a positive disk size or none; GPU
// fields are all set or all empty, and GPU rows carry a vendor (when the
// file has that column; legacy 9-column files get the vendor from the
// knowledge table). It returns nil or an *IntegrityError.
func CheckTable(t *Table) error {
	var probs []string
	count := map[string]int{}
	add := func(check, format string, args ...any) {
		count[check]++
		if count[check] <= 3 {
			probs = append(probs, fmt.Sprintf(format, args...))
		}
	}
	if len(t.Offers) == 0 {
		add("empty", "no offers")
	}
	if total := len(t.Offers) + len(t.Skipped); total > 0 && float64(len(t.Skipped)) > maxSkippedShare*float64(total) {
		add("skipped", "%d of %d rows malformed", len(t.Skipped), total)
	}
	hasVendorCol := slices.Contains(t.Columns, "gpu_vendor")
	pattern := regionPatterns[BackendName(t.Provider)]
	for i, o := range t.Offers {
		row := i + 2 // header is line 1; approximate when rows were skipped
		if strings.TrimSpace(o.Instance) == "" {
			add("name", "row %d: empty instance name", row)
		}
		switch {
		case strings.TrimSpace(o.Region) == "" || strings.TrimSpace(o.Region) != o.Region:
			add("region", "row %d: bad location %q", row, o.Region)
		case pattern != nil && !pattern.MatchString(o.Region):
			add("region", "row %d: location %q is not a known %s region", row, o.Region, t.Provider)
		}
		if !(o.Price > 0) {
			add("price", "row %d: price %v is not positive", row, o.Price)
		}
		if o.CPUs <= 0 {
			add("cpu", "row %d: cpu %d is not positive", row, o.CPUs)
		}
		if !(o.MemoryGB > 0) {
			add("memory", "row %d: memory %v is not positive", row, o.MemoryGB)
		}
		if o.DiskGB < 0 {
			add("disk", "row %d: disk %v is negative", row, o.DiskGB)
		}
		if o.GPUCount > 0 {
			if o.GPUName == "" || !(o.GPUMemoryGB > 0) {
				add("gpu", "row %d: %d GPUs without name or memory", row, o.GPUCount)
			}
			if hasVendorCol && o.GPUVendor == "" {
				add("vendor", "row %d: GPU row without gpu_vendor", row)
			}
		} else if o.GPUCount < 0 || o.GPUName != "" || o.GPUMemoryGB != 0 || o.GPUVendor != "" {
			add("gpu", "row %d: GPU fields set on a row with gpu_count %d", row, o.GPUCount)
		}
	}
	for check, n := range count {
		if n > 3 {
			probs = append(probs, fmt.Sprintf("%d more %s problems", n-3, check))
		}
	}
	if len(probs) == 0 {
		return nil
	}
	slices.Sort(probs)
	return &IntegrityError{Provider: t.Provider, Problems: probs}
}
