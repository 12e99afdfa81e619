package backends

import "testing"

func TestCheckRegions_refusesNamesNoProviderHas(t *testing.T) {
	if err := CheckRegions([]string{"us-east-1", "FIN-01"}, "region name"); err != nil {
		t.Fatalf("valid regions: %v", err)
	}
	for _, r := range []string{"", "us east", "a/b"} {
		if err := CheckRegions([]string{r}, "location code"); err == nil || err.Error() != `regions: "`+r+`" is not a location code` {
			t.Errorf("region %q: %v", r, err)
		}
	}
}

func TestEndpointURL_defaultsAndRefusesWhatIsNotHTTP(t *testing.T) {
	for _, tc := range []struct{ configured, want, err string }{
		{"", "https://api.example/v1", ""},
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1", ""},
		{"ftp://host/", "", `endpoint_url: "ftp://host/" is not an http(s) URL`},
		{"http://", "", `endpoint_url: "http://" is not an http(s) URL`},
	} {
		got, err := EndpointURL(tc.configured, "https://api.example/v1")
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("EndpointURL(%q) = %q, %v; want %q, %q", tc.configured, got, err, tc.want, tc.err)
		}
	}
}
