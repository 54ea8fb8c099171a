package lab

import (
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"None", nil, 0},
		{"One", []float64{7}, 7},
		{"Odd", []float64{9, 1, 5}, 5},
		{"Even", []float64{4, 1, 3, 2}, 2.5},
		{"Outlier", []float64{10, 11, 12, 1000}, 11.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.xs)
			if got := Median(tt.xs); got != tt.want {
				t.Errorf("Median(%v) = %v, want %v", tt.xs, got, tt.want)
			}
			if !slices.Equal(in, tt.xs) {
				t.Errorf("Median reordered its input: %v", tt.xs)
			}
		})
	}
}
