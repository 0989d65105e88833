package procscan

// Result is what one [Scanner.Scan] saw. A Result is fresh on every scan and
// owns all its slices, so callers may keep it as long as they like.
type Result struct {
	// Processes holds every distinct PID, other than 0 and the scanner's own,
	// listed by a device that was read, sorted by PID. Every one has an
	// Identity, falling back to the PID itself when procfs told us nothing.
	Processes []Process
	// Foreign reports that some device listed PID 0: at least one holder
	// lives outside our PID namespace. All such holders collapse into this one
	// flag, because a 0 cannot be told apart from another 0.
	Foreign bool
	// Devices holds every numeric device directory found under the driver
	// path, sorted by number, including those whose pids file failed.
	Devices []Device
	// Complete reports that the driver directory was listed (or does not
	// exist) and every device's pids file was read and parsed. Only a
	// complete scan is evidence that an absent process has gone away.
	Complete bool
	// Errors says why the scan is incomplete: a *ListError, or one
	// *DeviceError per failed device. It is empty when Complete is true.
	Errors []error
}

// ProcessCount is the tt_process_count value: the number of distinct
// processes holding any device, where all PID-0 holders count as one. It is
// a floor, not an exact number, when Foreign is set.
func (r *Result) ProcessCount() int {
	n := len(r.Processes)
	if r.Foreign {
		n++
	}
	return n
}

// Process is one holder of one or more devices.
type Process struct {
	// PID is the process ID as rendered in the scanner's PID namespace.
	PID int
	// Devices lists the device numbers whose pids file names the PID, sorted.
	Devices []int
	// Identity names the process. For a given PID it stays the same from
	// scan to scan for as long as the same process holds that PID.
	Identity Identity
}

// Device is one device directory under the driver path.
type Device struct {
	// Number is the device number, the name of its directory.
	Number int
	// Read reports that its pids file was read and parsed; when false, the
	// device has a DeviceError in Result.Errors and Holders is 0.
	Read bool
	// Holders is the number of distinct processes holding the device (the
	// tt_device_process_count value): the scanner's own PID is excluded and
	// all PID-0 holders count as one.
	Holders int
	// Foreign reports that the device's pids file listed PID 0.
	Foreign bool
}
