package queuedproc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// HostCPU is one reading of the machine's CPU time counters (the "cpu"
// line of /proc/stat). Two readings tell how much of the time between
// them the hypervisor gave to other guests ("steal"): on a shared
// virtual machine a latency figure measured while half the CPU was
// stolen says more about the neighbours than about queued, so the bench
// prints the steal next to each figure.
type HostCPU struct {
	total, steal uint64
}

// ReadHostCPU reads /proc/stat.
func ReadHostCPU() (HostCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return HostCPU{}, fmt.Errorf("reading /proc/stat: %w", err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	// cpu user nice system idle iowait irq softirq steal [guest guest_nice]
	if len(f) < 9 || string(f[0]) != "cpu" {
		return HostCPU{}, fmt.Errorf("reading /proc/stat: unexpected first line %q", line)
	}
	var h HostCPU
	// guest and guest_nice are already counted in user and nice.
	for i, v := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return HostCPU{}, fmt.Errorf("reading /proc/stat: field %d %q: %w", i+1, v, err)
		}
		h.total += n
		if i == 7 {
			h.steal = n
		}
	}
	return h, nil
}

// StealSince returns the share (0 to 1) of the CPU time between since and
// h that was stolen; 0 when no time passed.
func (h HostCPU) StealSince(since HostCPU) float64 {
	if h.total <= since.total {
		return 0
	}
	return float64(h.steal-since.steal) / float64(h.total-since.total)
}

// StealMeter measures the steal over one stretch of a benchmark. A meter
// whose reading failed reports 0, so a machine without /proc/stat still
// runs the bench.
type StealMeter struct {
	start HostCPU
	ok    bool
}

// StartSteal begins measuring.
func StartSteal() StealMeter {
	h, err := ReadHostCPU()
	return StealMeter{start: h, ok: err == nil}
}

// Stop returns the share of CPU time stolen since StartSteal.
func (m StealMeter) Stop() float64 {
	h, err := ReadHostCPU()
	if !m.ok || err != nil {
		return 0
	}
	return h.StealSince(m.start)
}
