package doctor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/store"
)

const startFix = "systemctl --user start queued (or run queued in a terminal); journalctl --user -u queued says why it stopped"

func checkQueued(h Host, s *api.Status, err error) Check {
	c := Check{Name: "queued"}
	switch {
	case h.Queued == nil:
		c.Status, c.Detail, c.Fix = Skip, "no way to reach queued", "set TT_DEVICE_LOG_DIR or HOME"
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED):
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("queued is not running: nothing listens at %s", h.QueuedAt), startFix
	case err != nil:
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("queued does not answer at %s: %v", h.QueuedAt, err), startFix
	case !s.Persistence.OK:
		c.Status, c.Detail, c.Fix = Fail, "queued answers but cannot write its store: "+s.Persistence.Error, "free disk space in "+h.StateDir
	default:
		mode := ""
		if modeOf(*s).System() {
			mode = " (system mode: one queue for every user of the host"
			if s.MaxQueuedPerUser > 0 {
				mode += fmt.Sprintf("; each user may have %d of the %d queued jobs, %d finished jobs, %s of output, %d connections, %d long-polls waiting and %d handlers at once",
					s.MaxQueuedPerUser, s.MaxQueued, s.MaxCompletedPerUser, bytesText(s.Output.MaxBytesPerUser), s.HTTP.ConnsPerUser, s.HTTP.WaitsPerUser, s.HTTP.WorkersPerUser)
			}
			mode += ")"
		}
		c.Status, c.Detail = OK, fmt.Sprintf("queued %s answers at %s%s, serving %d cards", s.Version, h.QueuedAt, mode, len(s.Cards))
	}
	return c
}

func checkToken(h Host) Check {
	c := Check{Name: "token"}
	if h.StateDir == "" {
		c.Status, c.Detail, c.Fix = Skip, fmt.Sprintf("no state directory: %v", h.StateDirErr), "set TT_DEVICE_LOG_DIR"
		return c
	}
	_, err := api.ReadToken(h.StateDir)
	switch {
	case errors.Is(err, api.ErrNoToken):
		c.Status, c.Detail, c.Fix = Fail, "no token in "+h.StateDir+": queued has not run with this state directory", startFix
	case err != nil:
		c.Status, c.Detail, c.Fix = Fail, err.Error(), "the token must be a file only you can read: chmod 600 it, or delete it and restart queued"
	default:
		c.Status, c.Detail = OK, "the token in "+h.StateDir+" is readable and private"
	}
	return c
}

func checkStore(h Host) Check {
	c := Check{Name: "store"}
	if h.StateDir == "" {
		c.Status, c.Detail = Skip, fmt.Sprintf("no state directory: %v", h.StateDirErr)
		return c
	}
	if _, err := os.Stat(h.StateDir); errors.Is(err, os.ErrNotExist) {
		c.Status, c.Detail, c.Fix = Skip, h.StateDir+" does not exist yet: queued has not run", startFix
		return c
	}
	if err := unix.Access(h.StateDir, unix.W_OK|unix.X_OK); err != nil {
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("%s is not writable: %v", h.StateDir, err), "chown -R \"$USER\" "+h.StateDir
		return c
	}
	db := filepath.Join(h.StateDir, store.FileName)
	if err := unix.Access(db, unix.R_OK|unix.W_OK); err != nil && !errors.Is(err, unix.ENOENT) {
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("%s is not writable: %v", db, err), "chown \"$USER\" "+db
		return c
	}
	c.Status, c.Detail = OK, h.StateDir+" and its store are writable"
	return c
}

func checkDisk(h Host) Check {
	c := Check{Name: "disk"}
	if h.StateDir == "" {
		c.Status, c.Detail = Skip, fmt.Sprintf("no state directory: %v", h.StateDirErr)
		return c
	}
	// The state directory may not exist yet: its nearest existing parent
	// is on the file system it will be created on.
	dir := h.StateDir
	var st unix.Statfs_t
	for {
		err := unix.Statfs(dir, &st)
		if err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if !errors.Is(err, unix.ENOENT) || parent == dir {
			c.Status, c.Detail = Skip, fmt.Sprintf("statfs %s: %v", dir, err)
			return c
		}
		dir = parent
	}
	free := st.Bavail * uint64(st.Bsize)
	detail := fmt.Sprintf("%s free on the file system of %s", mib(free), dir)
	switch {
	case free < h.MinFree:
		c.Status, c.Detail, c.Fix = Fail, detail+fmt.Sprintf(" (below %s: queued cannot record jobs)", mib(h.MinFree)), "free space there, or lower TT_DEVICE_MAX_OUTPUT_BYTES so old output is deleted sooner"
	case free < h.WarnFree:
		c.Status, c.Detail, c.Fix = Warn, detail+fmt.Sprintf(" (below %s)", mib(h.WarnFree)), "free space there, or lower TT_DEVICE_MAX_OUTPUT_BYTES"
	default:
		c.Status, c.Detail = OK, detail
	}
	return c
}

func mib(b uint64) string { return fmt.Sprintf("%d MiB", b>>20) }
