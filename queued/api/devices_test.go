package api

import (
	"slices"
	"strings"
	"testing"
)

func TestParseDevices(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{"1", []int{1}, ""},
		{" 0,1 ", []int{0, 1}, ""},
		{"0-3", []int{0, 1, 2, 3}, ""},
		{"3,0-1", []int{0, 1, 3}, ""},
		{"", nil, "empty"},
		{"0,0", nil, "card 0 is named twice"},
		{"0-2,1", nil, "card 1 is named twice"},
		{"3-1", nil, `range "3-1" runs backwards`},
		{"a", nil, `"a" is not a card number`},
		{"-1", nil, `"-1" is not a card number`},
		{"01", nil, `"01" is not a card number`},
		{"0,,1", nil, `"" is not a card number`},
		{"99999999", nil, "is not a card number"},
	} {
		got, err := ParseDevices(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if got := FormatDevices([]int{0, 2, 3}); got != "0,2,3" {
		t.Errorf("FormatDevices = %q", got)
	}
}
