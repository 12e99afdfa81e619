package offers

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// CSVColumns is gpuhunt's v2 catalog column order (storage.py CATALOG_V2_FIELDS).
var CSVColumns = []string{
	"instance_name", "location", "price", "cpu", "memory", "gpu_count", "gpu_name",
	"gpu_memory", "spot", "disk_size", "gpu_vendor", "flags", "cpu_arch", "provider_data",
}

// A Table is one provider's catalog as read from a gpuhunt CSV file.
type Table struct {
	// Provider is the provider name the file is for (aws, lambdalabs, ...).
	Provider string
	// Version is the catalog version (gpuhunt's YYYYMMDD-N) or another label.
	Version string
	// Offers are the rows in file order, with Backend set from Provider.
	Offers []Offer
	// ProviderData holds each row's provider_data JSON text ("{}" when empty),
	// parallel to Offers; nil when the file has no such column.
	ProviderData []string
	// Skipped lists one warning per malformed row that was left out.
	Skipped []error
	// Columns is the header of the file as read.
	Columns []string

	origin string
}

// RowError describes a catalog row that was skipped.
type RowError struct {
	// Line is the 1-based line of the row in the file.
	Line int
	// Err is what was wrong with it.
	Err error
}

// Error implements error.
func (e *RowError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns the underlying error.
func (e *RowError) Unwrap() error { return e.Err }

// Column positions in CSVColumns.
const (
	colInstance = iota
	colLocation
	colPrice
	colCPU
	colMemory
	colGPUCount
	colGPUName
	colGPUMemory
	colSpot
	colDisk
	colGPUVendor
	colFlags
	colCPUArch
	colProviderData
)

// requiredCols must be present in a catalog header and non-empty in a row.
var requiredCols = []int{colInstance, colLocation, colPrice, colCPU, colMemory, colGPUCount, colSpot}

// ReadCSV reads a gpuhunt catalog CSV for provider. Columns are found by
// header name, so gpuhunt's v2 (14 columns), v1 (11) and older 9-column
// files all load; missing optional columns take gpuhunt's defaults. A
// malformed row is skipped and recorded in Table.Skipped, never failing the
// file; a missing or unusable header fails it.
func ReadCSV(r io.Reader, provider string) (*Table, error) {
	return readCSV(r, provider, 0)
}

// readCSV is ReadCSV with a guess of the row count for preallocation.
func readCSV(r io.Reader, provider string, rowsHint int) (*Table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("read %s catalog header: %w", provider, err)
	}
	header = append([]string(nil), header...)
	var cols [colProviderData + 1]int // position in the file, -1 when absent
	for k := range cols {
		cols[k] = -1
	}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if k := slices.Index(CSVColumns, h); k >= 0 && cols[k] < 0 {
			cols[k] = i
		}
	}
	for _, k := range requiredCols {
		if cols[k] < 0 {
			return nil, fmt.Errorf("read %s catalog: column %q missing from header", provider, CSVColumns[k])
		}
	}
	t := &Table{Provider: provider, Columns: header, Offers: make([]Offer, 0, rowsHint)}
	hasPD := cols[colProviderData] >= 0
	backend := BackendName(provider)
	line := 1
	var rec []string
	get := func(k int) string {
		if i := cols[k]; i >= 0 && i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	for {
		rec, err = cr.Read()
		line++
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) && pe.Err != csv.ErrFieldCount {
				t.Skipped = append(t.Skipped, &RowError{Line: line, Err: err})
				continue
			}
			return nil, fmt.Errorf("read %s catalog: %w", provider, err)
		}
		o, err := parseRow(get)
		if err != nil {
			t.Skipped = append(t.Skipped, &RowError{Line: line, Err: err})
			continue
		}
		o.Backend = backend
		t.Offers = append(t.Offers, o)
		if hasPD {
			pd := get(colProviderData)
			if pd == "" {
				pd = "{}"
			}
			t.ProviderData = append(t.ProviderData, pd)
		}
	}
	return t, nil
}

// parseRow converts one CSV row, applying gpuhunt's back-compat rules.
func parseRow(get func(int) string) (Offer, error) {
	var o Offer
	for _, k := range requiredCols {
		if get(k) == "" {
			return o, fmt.Errorf("required field %s is empty", CSVColumns[k])
		}
	}
	var err error
	o.Instance = get(colInstance)
	o.Region = get(colLocation)
	if o.Price, err = parseFloat("price", get(colPrice)); err != nil {
		return o, err
	}
	if o.CPUs, err = parseInt("cpu", get(colCPU)); err != nil {
		return o, err
	}
	if o.MemoryGB, err = parseFloat("memory", get(colMemory)); err != nil {
		return o, err
	}
	if o.GPUCount, err = parseInt("gpu_count", get(colGPUCount)); err != nil {
		return o, err
	}
	switch strings.ToLower(get(colSpot)) {
	case "true":
		o.Spot = true
	case "false":
	default:
		return o, fmt.Errorf("spot: %q is neither True nor False", get(colSpot))
	}
	o.GPUName = get(colGPUName)
	if v := get(colGPUMemory); v != "" {
		if o.GPUMemoryGB, err = parseFloat("gpu_memory", v); err != nil {
			return o, err
		}
	}
	if v := get(colDisk); v != "" {
		if o.DiskGB, err = parseFloat("disk_size", v); err != nil {
			return o, err
		}
	}
	o.GPUVendor = strings.ToLower(get(colGPUVendor))
	switch o.GPUVendor {
	case "", VendorNVIDIA, VendorAMD, VendorGoogle, VendorIntel, VendorTenstorrent:
	default:
		return o, fmt.Errorf("gpu_vendor: %q is not a known vendor", o.GPUVendor)
	}
	if strings.HasPrefix(o.GPUName, "tpu-") {
		o.GPUName = strings.TrimPrefix(o.GPUName, "tpu-")
		if o.GPUVendor == "" {
			o.GPUVendor = VendorGoogle
		}
	}
	o.CPUArch = strings.ToLower(get(colCPUArch))
	if o.CPUArch == "" {
		o.CPUArch = ArchX86
	}
	if f := get(colFlags); f != "" {
		o.Flags = strings.Fields(f)
	}
	o.Availability = AvailabilityUnknown
	return o, nil
}

func parseFloat(field, s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s: %q is not a number", field, s)
	}
	return v, nil
}

func parseInt(field, s string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil {
		// gpuhunt writes ints through Python; tolerate "8.0".
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<31 {
			return 0, fmt.Errorf("%s: %q is not an integer", field, s)
		}
		v = int(f)
	}
	return v, nil
}

// WriteCSV writes offers as a gpuhunt v2 catalog (14 columns, values
// encoded as gpuhunt's Python writer does: floats as "24.0", spot as
// True/False, empty optional values). providerData, when non-nil, is
// parallel to offers; otherwise every row gets "{}".
func WriteCSV(w io.Writer, offers []Offer, providerData []string) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVColumns); err != nil {
		return fmt.Errorf("write catalog: %w", err)
	}
	rec := make([]string, len(CSVColumns))
	for i, o := range offers {
		rec[0] = o.Instance
		rec[1] = o.Region
		rec[2] = pyFloat(o.Price)
		rec[3] = strconv.Itoa(o.CPUs)
		rec[4] = pyFloat(o.MemoryGB)
		rec[5] = strconv.Itoa(o.GPUCount)
		rec[6], rec[7] = "", ""
		if o.GPUName != "" {
			rec[6] = o.GPUName
		}
		if o.GPUMemoryGB != 0 || o.GPUCount > 0 {
			rec[7] = pyFloat(o.GPUMemoryGB)
		}
		rec[8] = "False"
		if o.Spot {
			rec[8] = "True"
		}
		rec[9] = ""
		if o.DiskGB != 0 {
			rec[9] = pyFloat(o.DiskGB)
		}
		rec[10] = o.GPUVendor
		rec[11] = strings.Join(o.Flags, " ")
		rec[12] = o.CPUArch
		if rec[12] == "" {
			rec[12] = ArchX86
		}
		rec[13] = "{}"
		if providerData != nil && providerData[i] != "" {
			rec[13] = providerData[i]
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write catalog: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write catalog: %w", err)
	}
	return nil
}

// pyFloat formats v as Python's str(float) does for the magnitudes catalogs use.
func pyFloat(v float64) string {
	if a := math.Abs(v); a != 0 && (a < 1e-4 || a >= 1e16) {
		s := strconv.FormatFloat(v, 'e', -1, 64)
		// Python writes 1e-05, Go 1e-05 as well; keep Go's two-digit exponent.
		return s
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}
