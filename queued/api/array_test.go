package api_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

func TestParseArray(t *testing.T) {
	t.Parallel()
	good := map[string][]int{
		"0-7":     {0, 1, 2, 3, 4, 5, 6, 7},
		"3":       {3},
		"1,3,5":   {1, 3, 5},
		"0-8:4":   {0, 4, 8},
		" 0-1,5 ": {0, 1, 5},
	}
	for spec, want := range good {
		got, err := api.ParseArray(spec)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseArray(%q) = %v, %v; want %v", spec, got, err, want)
		}
	}
	bad := map[string]string{
		"":        "empty",
		"7-0":     "backwards",
		"a-3":     `"a" is not an index`,
		"-1":      `"" is not an index`,
		"0-3,2":   "index 2 is given twice",
		"0-7%2":   "%2 cannot change anything",
		"0-9999":  "more than 1000 elements",
		"0-4:0":   "step",
		"2000000": "above",
	}
	for spec, want := range bad {
		_, err := api.ParseArray(spec)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "array \""+spec+"\"") {
			t.Errorf("ParseArray(%q) = %v; want an error naming it and saying %q", spec, err, want)
		}
	}
}
