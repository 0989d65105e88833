package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// StartsFile is the start log beside the bbolt file: one slot per card
// naming the last job whose start was made durable there instead of in
// queue.db (issue 41). A job's start must be durable before its program
// runs, so that a crash never runs it twice; a bbolt commit is two
// fdatasync and more, a slot is one write of one sector and one
// fdatasync, so the card's worker writes the slot, runs the job, and
// commits the job's running record (with the previous job's end) while
// the job runs. After a crash, a job whose record still reads queued but
// whose slot names it, at its current attempt, started: the restart ends
// it as interrupted, as it ends a job whose record reads running.
//
// Layout: StartSlots slots of StartSlotBytes, slot n for card n, each the
// magic "TTSTART1", the attempt (4 bytes), the id's length (2 bytes), the
// id, and a CRC-32 of all before it. A slot is one sector, so a write cut
// short by a power loss leaves the old slot or the new one, and a torn
// slot fails its checksum. The whole file is written when the store
// opens, so a slot's write allocates nothing and fdatasync flushes no
// metadata.
const StartsFile = "starts"

// StartSlots is how many cards have a slot; the card numbers 0 to
// StartSlots-1. A card without one commits each start in queue.db.
const StartSlots = 256

// StartSlotBytes is a slot's size: one sector.
const StartSlotBytes = 512

// maxStartID bounds the job id a slot holds.
const maxStartID = StartSlotBytes - 8 - 4 - 2 - 4

var startMagic = []byte("TTSTART1")

// ErrNoStartSlot means a start cannot be marked in the start log: the
// card has no slot, the id does not fit, or the log could not be made.
// The caller commits the start in queue.db instead.
var ErrNoStartSlot = errors.New("no slot in the start log")

// StartMark is what a slot of the start log says: the job whose start on
// the card was made durable there last, at which attempt.
type StartMark struct {
	Card    int
	ID      string
	Attempt int
}

// StartLog is the open start log. It is safe for concurrent use: each
// card's slot is its own sector.
type StartLog struct {
	f    *os.File
	path string
	err  error // why the log could not be made; MarkStart returns it
}

// OpenStartLog opens (creating, mode 0600, never through a link) the
// start log in dir, the store's directory, and makes sure the whole file
// is written. A log that cannot be written leaves every start to
// queue.db (MarkStart fails); one that cannot be opened is an error.
func OpenStartLog(dir string) (*StartLog, error) {
	path := filepath.Join(dir, StartsFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	l := &StartLog{f: f, path: path}
	if err := reserve(f, StartSlots*StartSlotBytes); err != nil {
		l.err = fmt.Errorf("%w: reserving %s: %v", ErrNoStartSlot, path, err)
	}
	return l, nil
}

// Close closes the file; a start marked after it fails, and is
// committed instead.
func (l *StartLog) Close() error { return l.f.Close() }

// Marks reads what the start log's slots say now, in card order. An
// error means the log cannot be read: starting the queues without it
// could run a job twice.
func (l *StartLog) Marks() ([]StartMark, error) {
	buf := make([]byte, StartSlots*StartSlotBytes)
	n, err := l.f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading %s: %w", l.path, err)
	}
	var marks []StartMark
	for card := range n / StartSlotBytes {
		if m, ok := decodeStart(buf[card*StartSlotBytes : (card+1)*StartSlotBytes]); ok {
			m.Card = card
			marks = append(marks, m)
		}
	}
	return marks, nil
}

// MarkStart durably records, in card's slot, that job id starts its
// attempt now; an empty id clears the slot (a job marked and then put
// back in its queue without running). It returns once the slot is on
// disk. ErrNoStartSlot (wrapped) means the start must be committed in
// queue.db instead.
func (l *StartLog) MarkStart(card int, id string, attempt int) error {
	switch {
	case l.err != nil:
		return l.err
	case card < 0 || card >= StartSlots:
		return fmt.Errorf("%w: card %d (the log has slots for cards 0 to %d)", ErrNoStartSlot, card, StartSlots-1)
	case len(id) > maxStartID:
		return fmt.Errorf("%w: job id of %d bytes", ErrNoStartSlot, len(id))
	}
	if _, err := l.f.WriteAt(encodeStart(id, attempt), int64(card*StartSlotBytes)); err != nil {
		return fmt.Errorf("writing the start of %q in %s: %w", id, l.path, err)
	}
	if err := unix.Fdatasync(int(l.f.Fd())); err != nil {
		return fmt.Errorf("writing the start of %q: fdatasync %s: %w", id, l.path, err)
	}
	return nil
}

// encodeStart is a slot naming id at attempt; with no id, an empty slot.
func encodeStart(id string, attempt int) []byte {
	b := make([]byte, StartSlotBytes)
	if id == "" {
		return b
	}
	copy(b, startMagic)
	binary.BigEndian.PutUint32(b[8:12], uint32(attempt))
	binary.BigEndian.PutUint16(b[12:14], uint16(len(id)))
	end := 14 + copy(b[14:], id)
	binary.BigEndian.PutUint32(b[end:end+4], crc32.ChecksumIEEE(b[:end]))
	return b
}

// decodeStart reads a slot; ok is false for an empty, torn or foreign
// one.
func decodeStart(b []byte) (m StartMark, ok bool) {
	if len(b) != StartSlotBytes || string(b[:8]) != string(startMagic) {
		return m, false
	}
	n := int(binary.BigEndian.Uint16(b[12:14]))
	if n == 0 || n > maxStartID {
		return m, false
	}
	end := 14 + n
	if crc32.ChecksumIEEE(b[:end]) != binary.BigEndian.Uint32(b[end:end+4]) {
		return m, false
	}
	return StartMark{ID: string(b[14:end]), Attempt: int(binary.BigEndian.Uint32(b[8:12]))}, true
}
