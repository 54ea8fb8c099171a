package lab

import "testing"

// TestFill: a template takes the run's metrics, settings and cast, and
// says "?" for what the run did not show.
func TestFill(t *testing.T) {
	r := &Result{}
	r.SetMetric("rows", 0)
	r.SetMetric("growth", 4.12)
	r.SetSetting("lease", "30s")
	r.SetCast("stale", "Worker-A")
	cases := []struct{ template, want string }{
		{"{@stale}'s ack changed {rows} rows", "Worker-A's ack changed 0 rows"},
		{"grew {growth}x under a {lease} lease", "grew 4.12x under a 30s lease"},
		{"{@owner} and {unmeasured}", "? and ?"},
		{"no placeholder, {NotOne}", "no placeholder, {NotOne}"},
	}
	for _, c := range cases {
		if got := r.Fill(c.template); got != c.want {
			t.Errorf("Fill(%q) = %q, want %q", c.template, got, c.want)
		}
	}
	if got := r.Missing("{@stale} {@owner} {rows} {unmeasured}"); len(got) != 2 || got[0] != "@owner" || got[1] != "unmeasured" {
		t.Errorf("Missing = %v, want [@owner unmeasured]", got)
	}
}
