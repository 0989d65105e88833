package api

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// MaxCardNumber bounds a card number in a device list; the KMD numbers
// cards from 0 upwards, a few dozen at most on one host.
const MaxCardNumber = 1 << 16

// ParseDevices reads a device list as `--device` and the HTTP device_id
// take it: one card ("1"), a comma list ("0,1"), a range ("0-3"), or a mix
// ("0,2-3"). It returns the cards ascending; a card named twice, a range
// that runs backwards and anything that is not a card number are refused,
// naming the bad part.
func ParseDevices(spec string) ([]int, error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return nil, fmt.Errorf("device list %q: empty; want a card number such as 1, a list such as 0,1 or a range such as 0-3", spec)
	}
	seen := map[int]bool{}
	var out []int
	add := func(n int) error {
		if seen[n] {
			return fmt.Errorf("device list %q: card %d is named twice", spec, n)
		}
		seen[n] = true
		out = append(out, n)
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cardNumber(lo)
		if err != nil {
			return nil, fmt.Errorf("device list %q: %q %w", spec, part, err)
		}
		if !isRange {
			if err := add(a); err != nil {
				return nil, err
			}
			continue
		}
		b, err := cardNumber(hi)
		if err != nil {
			return nil, fmt.Errorf("device list %q: %q %w", spec, part, err)
		}
		if b < a {
			return nil, fmt.Errorf("device list %q: range %q runs backwards", spec, part)
		}
		for n := a; n <= b; n++ {
			if err := add(n); err != nil {
				return nil, err
			}
		}
	}
	sort.Ints(out)
	return out, nil
}

// cardNumber reads one card number.
func cardNumber(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > MaxCardNumber || strconv.Itoa(n) != strings.TrimSpace(s) {
		return 0, fmt.Errorf("is not a card number; want a card number such as 1, a list such as 0,1 or a range such as 0-3")
	}
	return n, nil
}

// FormatDevices writes cards as a comma list, ascending as given.
func FormatDevices(cards []int) string {
	parts := make([]string, len(cards))
	for i, c := range cards {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}
