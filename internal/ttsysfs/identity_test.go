package ttsysfs

import (
	"errors"
	"path/filepath"
	"runtime"
	"testing"
)

// testdataSys is the sys directory of one host kind's fake tree.
func testdataSys(t *testing.T, kind string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "sysfs", kind, "sys")
}

// Each card of a QuietBox (four p150) and of a T3000 (four n300) is named
// by its PCI address and its board.
func TestIdentify_MultiCardHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind, cardType string
		bdfs           []string
	}{
		{"quietbox", "p150a", []string{"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"}},
		{"t3000", "n300", []string{"0000:04:00.0", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0"}},
	} {
		root := testdataSys(t, tc.kind)
		serials := map[string]bool{}
		for n, want := range tc.bdfs {
			id, err := Identify(root, n)
			if err != nil {
				t.Fatalf("%s card %d: %v", tc.kind, n, err)
			}
			if id.PCIAddress != want || id.Info.CardType != tc.cardType || id.Info.Serial == "" || serials[id.Info.Serial] {
				t.Errorf("%s card %d: %+v, want %s %s with a serial of its own", tc.kind, n, id, want, tc.cardType)
			}
			serials[id.Info.Serial] = true
		}
		if _, err := Identify(root, 4); !errors.Is(err, ErrNoCard) {
			t.Errorf("%s card 4: %v, want ErrNoCard", tc.kind, err)
		}
	}
}

// The reader reads every card of a multi-card host.
func TestRead_QuietBox(t *testing.T) {
	t.Parallel()
	r := New(Options{Root: testdataSys(t, "quietbox")})
	defer r.Close()
	cards, errs := r.Read(nil)
	if len(errs) > 0 || len(cards) != 4 {
		t.Fatalf("%d cards, errors %v", len(cards), errs)
	}
	for i, c := range cards {
		if c.Number != i || c.Arch != "blackhole" || !c.Temperature.Input.OK {
			t.Errorf("card %d: %+v", i, c)
		}
	}
}
