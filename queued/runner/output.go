package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// Layout says where a job's output file was cut (see Log): the first
// CutAt bytes are the head, then CutMarker(Cut), then the tail; output
// offsets past CutAt+Cut are tail offsets. The zero Layout is a file that
// holds the output as it was written.
type Layout struct {
	CutAt int64
	Cut   int64
}

// CutMarker stands in the file, and in what a reader gets, for the cut
// part of a log: how many bytes were left out and why.
func CutMarker(cut int64) string {
	return "\n[tt-device-queue: " + strconv.FormatInt(cut, 10) +
		" bytes of output cut here; the first and the last half of TT_DEVICE_MAX_LOG_BYTES are kept]\n"
}

// ReadOutput reads up to limit bytes of output from offset out of a job's
// output file laid out as lay: the data, the offset to ask for next (past
// the cut part when offset falls in it, where the data is the marker) and
// the size (the offset just past the last byte). A missing file reads as
// empty (a job that never started has none).
func ReadOutput(path string, lay Layout, offset, limit int64) ([]byte, int64, int64, error) {
	f, err := openExisting(path, os.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return nil, offset, 0, nil
	}
	if err != nil {
		return nil, offset, 0, fmt.Errorf("opening output: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, offset, 0, fmt.Errorf("reading output: %w", err)
	}
	if lay.Cut <= 0 {
		return readFile(f, offset, limit, fi.Size())
	}
	marker := int64(len(CutMarker(lay.Cut)))
	size := fi.Size() - marker + lay.Cut
	tail := lay.CutAt + lay.Cut
	switch {
	case offset >= size || limit <= 0:
		return nil, offset, size, nil
	case offset < lay.CutAt:
		return readFile(f, offset, min(limit, lay.CutAt-offset), size)
	case offset < tail:
		return []byte(CutMarker(lay.Cut)), tail, size, nil
	}
	shift := marker - lay.Cut // file position minus output offset, in the tail
	data, _, _, err := readFile(f, offset+shift, min(limit, size-offset), fi.Size())
	return data, offset + int64(len(data)), size, err
}

// readFile reads up to limit bytes at offset of f, reporting size as the
// size.
func readFile(f *os.File, offset, limit, size int64) ([]byte, int64, int64, error) {
	if limit <= 0 || offset >= size {
		return nil, offset, size, nil
	}
	buf := make([]byte, min(limit, size-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, offset, size, fmt.Errorf("reading output: %w", err)
	}
	return buf[:n], offset + int64(n), size, nil
}

// InspectLog reports, for a job whose Log is gone without its Close (one
// found interrupted at start), the output file's size and whether output
// reached limit: its tail was in memory and is lost, so the file holds the
// first limit bytes as they were written. A missing file is empty.
func InspectLog(path string, limit int64) (size int64, truncated bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading %s: %w", path, err)
	}
	return fi.Size(), fi.Size() >= limit, nil
}
