package api

import (
	"regexp"
	"testing"
)

// TestValidEnvName checks the rule against a regular expression of it: a
// shell variable name, in ASCII only.
func TestValidEnvName(t *testing.T) {
	t.Parallel()
	pattern := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	for _, name := range []string{"", "A", "_", "a1", "_1", "1A", "A-B", "A B", "A=B", "é", "Aé", "PATH", "TT_METAL_HOME", "a\x00", "\xff"} {
		if got, want := ValidEnvName(name), pattern.MatchString(name); got != want {
			t.Errorf("ValidEnvName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestEnvBytes counts NAME=VALUE and a NUL for each variable, as exec
// passes them.
func TestEnvBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want int
	}{
		{nil, 0},
		{map[string]string{"A": ""}, 3},
		{map[string]string{"A": "1", "PATH": "/bin"}, 4 + 10},
	} {
		if got := EnvBytes(tc.env); got != tc.want {
			t.Errorf("EnvBytes(%v) = %d, want %d", tc.env, got, tc.want)
		}
	}
}
