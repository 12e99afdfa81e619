package local

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAllocGPUs(t *testing.T) {
	tests := []struct {
		name  string
		total int
		used  [][]string
		n     int
		want  []string
	}{
		{"no gpus asked", 8, nil, 0, nil},
		{"lowest first", 8, nil, 2, []string{"0", "1"}},
		{"skips reserved", 8, [][]string{{"0", "1"}, {"3"}}, 3, []string{"2", "4", "5"}},
		{"not enough free", 4, [][]string{{"0", "1", "2"}}, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, allocGPUs(tt.total, tt.used, tt.n)); diff != "" {
				t.Errorf("allocGPUs (-want +got):\n%s", diff)
			}
		})
	}
}
