package ttsysfs

import (
	"testing"

	"github.com/ttkit/ttkit/internal/kmdtest"
)

// BenchmarkRead32 reads 32 Blackhole cards, every sensor and attribute
// present, in steady state: the class listing and ten attributes a card
// each time, labels, limits and identity every DefaultStaticEvery reads.
func BenchmarkRead32(b *testing.B) {
	r := New(Options{Root: kmdtest.BusySysfs(b, b.TempDir(), 32).Root})
	cards, errs := r.Read(nil)
	if len(cards) != 32 || len(errs) != 0 {
		b.Fatalf("%d cards, %v", len(cards), errs)
	}
	b.ReportAllocs()
	for b.Loop() {
		cards, errs = r.Read(cards[:0])
		if len(cards) != 32 || len(errs) != 0 {
			b.Fatalf("%d cards, %v", len(cards), errs)
		}
	}
}
