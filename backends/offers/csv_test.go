package offers

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gpuhuntRows are v2 rows written as gpuhunt's Python writer writes them
// (test_storage.py round trip row first).
var gpuhuntRows = []string{
	`i,loc,1.0,1,1.0,0,,,False,,,,x86,{}`,
	`p5.48xlarge,us-east-1,98.32,192,2048.0,8,H100,80.0,False,,nvidia,,x86,{}`,
	`gpu_1x_gh200,us-east-3,1.49,64,463.0,1,GH200,96.0,False,,nvidia,lambda-arm,arm,{}`,
	`gpu-h100-sxm 8gpu-128vcpu-1600gb,eu-north1,23.6,128,1600.0,8,H100,80.0,True,,nvidia,,x86,"{""fabrics"": [""fabric-2"", ""fabric-3""]}"`,
	`v5litepod-8,us-west4-a,9.6,224,384.0,8,v5litepod-8,128.0,True,100.0,google,gcp-dws-calendar-mode oci-spot,x86,{}`,
	`1x-H200,"France, FR, EU",2.65,32,64.0,1,H200,140.4,False,,nvidia,,x86,{}`,
}

func TestWriteCSV_roundTripIsByteIdentical(t *testing.T) {
	in := strings.Join(CSVColumns, ",") + "\n" + strings.Join(gpuhuntRows, "\n") + "\n"
	tb, err := ReadCSV(strings.NewReader(in), "gcp")
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Skipped) != 0 || len(tb.Offers) != len(gpuhuntRows) {
		t.Fatalf("read %d offers, skipped %v", len(tb.Offers), tb.Skipped)
	}
	var out bytes.Buffer
	if err := WriteCSV(&out, tb.Offers, tb.ProviderData); err != nil {
		t.Fatal(err)
	}
	// encoding/csv ends lines with \n, as Python's csv module does with lineterminator="\n".
	if diff := cmp.Diff(in, strings.ReplaceAll(out.String(), "\r\n", "\n")); diff != "" {
		t.Errorf("round trip (-in +out):\n%s", diff)
	}
	if got := tb.Offers[2]; got.CPUArch != ArchARM || len(got.Flags) != 1 || got.Flags[0] != "lambda-arm" {
		t.Errorf("arm row read as %+v", got)
	}
	if got := tb.Offers[4]; got.DiskGB != 100 || !got.Spot || len(got.Flags) != 2 {
		t.Errorf("tpu row read as %+v", got)
	}
}

func TestWriteCSV_roundTripOfSnapshot(t *testing.T) {
	c := mustEmbedded(t)
	for _, tb := range c.Tables() {
		var buf bytes.Buffer
		if err := WriteCSV(&buf, tb.Offers, tb.ProviderData); err != nil {
			t.Fatal(err)
		}
		back, err := ReadCSV(&buf, tb.Provider)
		if err != nil {
			t.Fatal(err)
		}
		if len(back.Skipped) > 0 {
			t.Fatalf("%s: rewritten catalog has bad rows: %v", tb.Provider, back.Skipped)
		}
		if diff := cmp.Diff(tb.Offers, back.Offers); diff != "" {
			t.Errorf("%s: offers changed through write and read (-before +after):\n%s", tb.Provider, diff)
		}
	}
}

func TestReadCSV_legacyAndMalformed(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		offers  int
		skipped int
		check   func(t *testing.T, tb *Table)
	}{
		{
			name:   "nine-column dstack file defaults vendor later, arch x86 now",
			in:     "instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot\ng4dn.xlarge,us-east-1,0.526,4,16.0,1,T4,16.0,False\n",
			offers: 1,
			check: func(t *testing.T, tb *Table) {
				if o := tb.Offers[0]; o.CPUArch != ArchX86 || o.GPUVendor != "" || o.Backend != "aws" {
					t.Errorf("read %+v", o)
				}
			},
		},
		{
			name:   "tpu- prefix is stripped and implies google",
			in:     strings.Join(CSVColumns, ",") + "\nv3-8,us-central1-a,8.0,96,335.0,4,tpu-v3-8,16.0,False,,,,x86,{}\n",
			offers: 1,
			check: func(t *testing.T, tb *Table) {
				if o := tb.Offers[0]; o.GPUName != "v3-8" || o.GPUVendor != VendorGoogle {
					t.Errorf("read %+v", o)
				}
			},
		},
		{
			name: "bad rows are skipped with their line, good rows kept",
			in: "instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot\n" +
				"a,r,1.0,2,4.0,0,,,False\n" +
				"b,r,,2,4.0,0,,,False\n" + // empty price
				"c,r,1.0,two,4.0,0,,,False\n" + // bad cpu
				"d,r,1.0,2,4.0,0,,,maybe\n" + // bad spot
				"e,r,1.0,2\n" + // short row
				"f,r,2.0,2,4.0,0,,,TRUE\n",
			offers:  2,
			skipped: 4,
			check: func(t *testing.T, tb *Table) {
				var re *RowError
				if !errors.As(tb.Skipped[0], &re) || re.Line != 3 {
					t.Errorf("first skipped row reported as %v, want line 3", tb.Skipped[0])
				}
				if !tb.Offers[1].Spot {
					t.Error("TRUE not read as spot")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, err := ReadCSV(strings.NewReader(tt.in), "aws")
			if err != nil {
				t.Fatal(err)
			}
			if len(tb.Offers) != tt.offers || len(tb.Skipped) != tt.skipped {
				t.Fatalf("read %d offers and skipped %d (%v), want %d and %d", len(tb.Offers), len(tb.Skipped), tb.Skipped, tt.offers, tt.skipped)
			}
			if tt.check != nil {
				tt.check(t, tb)
			}
		})
	}
}

func TestReadCSV_headerWithoutRequiredColumnFails(t *testing.T) {
	if _, err := ReadCSV(strings.NewReader("instance_name,location,price\na,b,1\n"), "x"); err == nil {
		t.Fatal("ReadCSV accepted a header without cpu/memory/gpu_count/spot")
	}
}

func TestSnapshot_filesAreTheSharedCatalogs(t *testing.T) {
	names, err := fs.Glob(snapshotFS, "snapshot/*.csv")
	if err != nil || len(names) != 12 {
		t.Fatalf("embedded %d catalogs (%v), want 12", len(names), err)
	}
}
