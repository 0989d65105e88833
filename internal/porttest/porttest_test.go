package porttest

import "testing"

// However many ports a test takes, none comes twice, which a listener on
// port 0 alone does not promise.
func TestFree_NeverTheSamePortTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 2000 {
		p := Free(t)
		if p <= 0 || p > 65535 || seen[p] {
			t.Fatalf("port %d (seen before: %v)", p, seen[p])
		}
		seen[p] = true
	}
}
