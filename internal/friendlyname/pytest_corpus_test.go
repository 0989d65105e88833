package friendlyname

import (
	"testing"

	"github.com/ttkit/ttkit/internal/kmdtest"
)

// TestDerive_PytestCorpus names pytest command lines as they are run on
// hosts with Tenstorrent cards and in CI generally, from the corpus the
// receiver's tests share (testdata/friendlyname/pytest-corpus.tsv):
// conftest options of the kind tt-metal-style projects define (a device
// id, a model variant), xdist, pytest-benchmark, pytest-timeout, asyncio
// and html plugins, with the options in every position. None of these
// options is in the built-in table: the general rule has to get past them.
// An unknown long option may take the next token as its value, so a
// following token is taken as the target only when it looks like one (a
// path ending in .py, a "::" node ID, a directory with a trailing slash); a
// path with a slash is the fallback; a bare word after such an option is
// its value.
func TestDerive_PytestCorpus(t *testing.T) {
	t.Parallel()
	for _, tc := range kmdtest.Corpus(t, "pytest-corpus") {
		t.Run(tc.CommandLine, func(t *testing.T) {
			t.Parallel()
			if got := Derive(tc.CommandLine); got != tc.FriendlyName {
				t.Errorf("Derive(%q) = %q, want %q", tc.CommandLine, got, tc.FriendlyName)
			}
		})
	}
}
