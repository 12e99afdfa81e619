package offers

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzReadCSV checks that no input makes ReadCSV panic and that whatever
// it accepts survives a write and a second read unchanged.
func FuzzReadCSV(f *testing.F) {
	f.Add(strings.Join(CSVColumns, ",") + "\n" + strings.Join(gpuhuntRows, "\n") + "\n")
	f.Add("instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot\na,b,1,2,3,0,,,False\n")
	f.Add("instance_name,location,price,cpu,memory,gpu_count,spot\n\"a\nb\",x,1e3,2,3,1,true\n")
	f.Fuzz(func(t *testing.T, in string) {
		tb, err := ReadCSV(strings.NewReader(in), "fuzz")
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := WriteCSV(&buf, tb.Offers, tb.ProviderData); err != nil {
			t.Fatal(err)
		}
		back, err := ReadCSV(&buf, "fuzz")
		if err != nil {
			t.Fatalf("rereading written catalog: %v", err)
		}
		if len(back.Offers) != len(tb.Offers) {
			t.Fatalf("%d offers became %d (skipped %v)", len(tb.Offers), len(back.Offers), back.Skipped)
		}
		for i := range tb.Offers {
			a, b := tb.Offers[i], back.Offers[i]
			if a.Instance != b.Instance || a.Region != b.Region || a.Price != b.Price || a.CPUs != b.CPUs ||
				a.GPUCount != b.GPUCount || a.GPUName != b.GPUName || a.Spot != b.Spot || a.MemoryGB != b.MemoryGB {
				t.Fatalf("offer %d changed: %+v became %+v", i, a, b)
			}
		}
		New("", tb) // building must not panic either
	})
}
