package challenge

import "testing"

// TestShellLine: a simple command is exec'd, so its exit is the
// program's own; anything sh must parse further runs as written.
func TestShellLine(t *testing.T) {
	tests := []struct{ command, want string }{
		{"python3 relay.py", "exec python3 relay.py"},
		{`python3 "my relay.py" --mistake no-token`, `exec python3 "my relay.py" --mistake no-token`},
		{"FOO=1 python3 relay.py", "FOO=1 python3 relay.py"},
		{"exec python3 relay.py", "exec python3 relay.py"},
		{"cd relay && python3 relay.py", "cd relay && python3 relay.py"},
		{"python3 relay.py > log", "python3 relay.py > log"},
		{"go run $HOME/relay", "go run $HOME/relay"},
	}
	for _, tt := range tests {
		if got := shellLine(tt.command); got != tt.want {
			t.Errorf("shellLine(%q) = %q, want %q", tt.command, got, tt.want)
		}
	}
}
