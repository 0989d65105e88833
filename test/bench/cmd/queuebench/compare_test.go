package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The summary of paired ratios is their median and range, the median of
// an even count being the mean of the middle two.
func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		rs          []float64
		med, lo, hi float64
	}{
		{[]float64{1.2}, 1.2, 1.2, 1.2},
		{[]float64{1.1, 0.9, 1.0}, 1.0, 0.9, 1.1},
		{[]float64{1.3, 0.8, 1.0, 0.9}, 0.95, 0.8, 1.3},
	} {
		med, lo, hi := spread(tc.rs)
		if med != tc.med || lo != tc.lo || hi != tc.hi {
			t.Errorf("spread(%v) = %v, %v, %v; want %v, %v, %v", tc.rs, med, lo, hi, tc.med, tc.lo, tc.hi)
		}
	}
}

// What -against cannot use is refused with the value named: a queued
// binary without its helper beside it (the run would measure the slow
// fallback), and a name that is neither a file nor a revision.
func TestBuildAgainst_Refusals(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "queued")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := buildAgainst(t.TempDir(), bin); err == nil || !strings.Contains(err.Error(), "no queued-exec beside it") {
		t.Errorf("a queued without queued-exec: %v", err)
	}
	if _, err := buildAgainst(t.TempDir(), "no-such-revision-of-ttkit"); err == nil || !strings.Contains(err.Error(), `"no-such-revision-of-ttkit"`) {
		t.Errorf("an unknown revision: %v", err)
	}
}
