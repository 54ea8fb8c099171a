package lab_test

import (
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

func TestExpectMetric(t *testing.T) {
	tests := []struct {
		name   string
		set    bool
		value  float64
		want   float64
		passed bool
		obs    string
	}{
		{"Equal", true, 6, 6, true, "6"},
		{"Differs", true, 12, 6, false, "12"},
		{"Missing", false, 0, 0, false, "not measured"},
		{"Fraction", true, 1.25, 1, false, "1.25"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r lab.Result
			if tt.set {
				r.SetMetric("k", tt.value)
			}
			r.ExpectMetric("k", tt.want, "")
			c := r.Checks[0]
			if c.Passed != tt.passed || c.Observed != tt.obs || r.Passed() != tt.passed {
				t.Fatalf("check = %+v, Passed() = %v; want passed %v observed %q", c, r.Passed(), tt.passed, tt.obs)
			}
		})
	}
}

func TestPassedNeedsChecks(t *testing.T) {
	var r lab.Result
	if r.Passed() {
		t.Fatal("a result without checks must not pass")
	}
}

func TestSetMetricReplaces(t *testing.T) {
	var r lab.Result
	r.SetMetric("a", 1)
	r.SetFlag("a", false)
	if len(r.Metrics) != 1 || r.Metrics[0].Value != 0 {
		t.Fatalf("metrics = %+v", r.Metrics)
	}
}

func TestCell(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{"", "-"}, {"x", "x"}, {true, "yes"}, {false, "no"}, {3, "3"}, {2.5, "2.5"}, {nil, "-"},
	}
	for _, tt := range tests {
		if got := lab.Cell(tt.in); got != tt.want {
			t.Errorf("Cell(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
