package ttprocessreceiver // import "github.com/ttkit/ttkit/receiver/ttprocessreceiver"

import (
	"errors"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/ttkit/ttkit/internal/procscan"
)

// deviceState is what the receiver last knew of one device: what it reports
// while the device cannot be read, and what a removal names.
type deviceState struct {
	label   string
	holders int
	foreign bool
	// seen is the generation that last found the device's directory;
	// ending counts down the cycles its staleness point is still sent in,
	// once the directory is gone.
	seen   uint64
	ending int
}

// recordDevices records tt_device_process_count and returns whether any
// device, read now or held, has holders outside our PID namespace. A device
// whose pids file could not be read holds its last value and its PID-0
// holders, like the series of its holders; a device whose directory is gone
// (on a scan that listed the driver directory) ends its series with
// NoRecordedValue points, sent in removalRepeats cycles. The names of the
// devices ended this cycle are left in s.endedDevices.
func (s *ttScraper) recordDevices(now pcommon.Timestamp, res *procscan.Result) bool {
	foreign := res.Foreign
	for _, d := range res.Devices {
		st := s.devices[d.Number]
		if st == nil {
			if !d.Read {
				continue // never read: nothing to hold
			}
			st = &deviceState{label: strconv.Itoa(d.Number)}
			s.devices[d.Number] = st
		}
		st.seen, st.ending = s.generation, 0
		if d.Read {
			st.holders, st.foreign = d.Holders, d.Foreign
		}
		foreign = foreign || st.foreign
		s.mb.RecordTtDeviceProcessCountDataPoint(now, int64(st.holders), s.hostname, st.label)
	}
	listed := listedDevices(res)
	s.endedDevices = s.endedDevices[:0]
	for n, st := range s.devices {
		if st.seen == s.generation {
			continue
		}
		if !listed {
			// The driver directory could not be listed: hold everything.
			foreign = foreign || st.foreign
			s.mb.RecordTtDeviceProcessCountDataPoint(now, int64(st.holders), s.hostname, st.label)
			continue
		}
		if st.ending == 0 {
			st.ending = removalRepeats
		}
		s.mb.RecordTtDeviceProcessCountDataPoint(now, 0, s.hostname, st.label)
		s.endedDevices = append(s.endedDevices, st.label)
		if st.ending--; st.ending == 0 {
			delete(s.devices, n)
		}
	}
	return foreign
}

// listedDevices reports whether res's device list is the driver
// directory's: every error is about one device's pids file.
func listedDevices(res *procscan.Result) bool {
	for _, err := range res.Errors {
		var de *procscan.DeviceError
		if !errors.As(err, &de) {
			return false
		}
	}
	return true
}

// markEndedDevices flags the tt_device_process_count points of the devices
// ended this cycle as NoRecordedValue.
func markEndedDevices(md pmetric.Metrics, ended []string) {
	stale := pmetric.DefaultDataPointFlags.WithNoRecordedValue(true)
	forEachPoint(md, "tt_device_process_count", func(dp pmetric.NumberDataPoint) {
		v, _ := dp.Attributes().Get("device")
		for _, label := range ended {
			if v.Str() == label {
				dp.SetFlags(stale)
			}
		}
	})
}

// forEachPoint calls fn for every point of the gauge named name.
func forEachPoint(md pmetric.Metrics, name string, fn func(pmetric.NumberDataPoint)) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if m := ms.At(k); m.Name() == name {
					dps := m.Gauge().DataPoints()
					for l := 0; l < dps.Len(); l++ {
						fn(dps.At(l))
					}
				}
			}
		}
	}
}
