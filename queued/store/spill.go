package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// SpillFile is the reserve beside the bbolt file that holds the records a
// failing store could not take. While writes fail (a full disk, an I/O
// error), the scheduler keeps finished jobs' records in memory and shows
// them as done; if it stops or crashes before the store recovers, those
// answers would be lost and the jobs read "interrupted" after the restart.
// The spill keeps them: its space is written in full when the store opens,
// so overwriting it later needs no new blocks even on a full disk, and the
// next Open writes what it holds into the store before anything reads it.
//
// Layout: two slots of SpillBytes/2, each a header (magic "TTSPILL1",
// 8-byte generation, 4-byte payload length, 4-byte CRC-32 of the payload)
// followed by the JSON payload. Each write goes to the slot not holding the
// newest generation, so a write cut short by a crash leaves the previous
// one readable; Open takes the valid slot with the highest generation. An
// empty payload clears the spill.
const SpillFile = "held.spill"

// SpillBytes is the size of the reserve. Spilled job records leave out
// the command, working directory and environment (Open takes them from the
// stored record), so a slot holds well over a thousand records.
const SpillBytes = 1 << 20

const (
	spillSlot   = SpillBytes / 2
	spillHeader = 8 + 8 + 4 + 4
)

var spillMagic = []byte("TTSPILL1")

// ErrSpillFull means the held records do not fit in a spill slot.
var ErrSpillFull = errors.New("held records exceed the spill reserve")

// spillPayload is what a slot holds.
type spillPayload struct {
	Cards []Card `json:"cards,omitempty"`
	Jobs  []Job  `json:"jobs,omitempty"`
}

// spill is the open reserve file.
type spill struct {
	f    *os.File
	gen  uint64 // the newest generation written
	slot int    // the slot holding it
	err  error  // why the reserve could not be made; Spill returns it
}

// openSpill opens (creating) the reserve, applies what its newest slot
// holds to the store and clears it, then makes sure the whole reserve is
// written. It fails only when held records cannot be applied: starting
// without them would contradict what the last run answered.
func (s *Store) openSpill() error {
	path := filepath.Join(s.dir, SpillFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	sp := &spill{f: f, slot: 1}
	s.spill = sp
	var newest *spillPayload
	for slot := range 2 {
		gen, p, ok := readSlot(f, slot)
		if ok && gen >= sp.gen {
			sp.gen, sp.slot, newest = gen, slot, p
		}
	}
	if newest != nil && (len(newest.Jobs) > 0 || len(newest.Cards) > 0) {
		if err := s.applySpill(newest); err != nil {
			return fmt.Errorf("writing the %d job and %d card records held in %s at the last stop: %w; free disk space and start again",
				len(newest.Jobs), len(newest.Cards), path, err)
		}
		if err := s.Spill(nil); err != nil {
			return fmt.Errorf("clearing %s: %w", path, err)
		}
	}
	if err := reserve(f, SpillBytes); err != nil {
		sp.err = fmt.Errorf("reserving %d bytes in %s: %w", SpillBytes, path, err)
	}
	return nil
}

// reserve writes zeros over the part of the file's first size bytes not
// yet written, so every later write there lands on allocated blocks (and
// its fdatasync flushes no metadata).
func reserve(f *os.File, size int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() >= size {
		return nil
	}
	zeros := make([]byte, size-fi.Size())
	if _, err := f.WriteAt(zeros, fi.Size()); err != nil {
		return err
	}
	return f.Sync()
}

// readSlot decodes one slot; ok is false for an empty, torn or foreign one.
func readSlot(f *os.File, slot int) (gen uint64, p *spillPayload, ok bool) {
	hdr := make([]byte, spillHeader)
	if _, err := f.ReadAt(hdr, int64(slot*spillSlot)); err != nil {
		return 0, nil, false
	}
	if string(hdr[:8]) != string(spillMagic) {
		return 0, nil, false
	}
	gen = binary.BigEndian.Uint64(hdr[8:16])
	n := binary.BigEndian.Uint32(hdr[16:20])
	sum := binary.BigEndian.Uint32(hdr[20:24])
	if int(n) > spillSlot-spillHeader {
		return 0, nil, false
	}
	body := make([]byte, n)
	if _, err := f.ReadAt(body, int64(slot*spillSlot+spillHeader)); err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, false
	}
	if crc32.ChecksumIEEE(body) != sum {
		return 0, nil, false
	}
	p = &spillPayload{}
	if n > 0 {
		if err := json.Unmarshal(body, p); err != nil {
			return 0, nil, false
		}
	}
	return gen, p, true
}

// applySpill writes spilled records into the store. A job record takes its
// command (preview), working directory and the sizes of its spec from the
// stored record, is written brief (the stored spec stays), and never turns
// a stored done record back into an active one.
func (s *Store) applySpill(p *spillPayload) error {
	var jobs []Job
	for _, j := range p.Jobs {
		stored, err := s.Brief(j.ID)
		if errors.Is(err, ErrNotFound) {
			continue // its insert never became durable, so nobody was answered about it
		}
		if err != nil {
			return err
		}
		if stored.State == StateDone && j.State != StateDone {
			continue
		}
		j.Cmd, j.Cwd, j.Env, j.EnvFromShell = stored.Cmd, stored.Cwd, nil, nil
		j.CmdBytes, j.CmdSHA256, j.EnvVars, j.EnvBytes = stored.CmdBytes, stored.CmdSHA256, stored.EnvVars, stored.EnvBytes
		j.Brief = true
		jobs = append(jobs, j)
	}
	return s.Commit(p.Cards, jobs...)
}

// Spill durably writes card and job records the store cannot take now into
// the reserve (see SpillFile), replacing what it held; Spill with no
// records clears it. The next Open writes them into the store. It fails
// with ErrSpillFull when they do not fit, or with the reason the reserve
// could not be made.
func (s *Store) Spill(cards []Card, jobs ...Job) error {
	s.spillMu.Lock()
	defer s.spillMu.Unlock()
	sp := s.spill
	if sp == nil {
		return ErrClosed
	}
	if sp.err != nil {
		return sp.err
	}
	p := spillPayload{Cards: cards}
	for _, j := range jobs {
		j.Cmd, j.Cwd, j.Env, j.EnvFromShell = "", "", nil, nil
		p.Jobs = append(p.Jobs, j)
	}
	var body []byte
	if len(cards) > 0 || len(jobs) > 0 {
		b, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("encoding held records: %w", err)
		}
		body = b
	}
	if len(body) > spillSlot-spillHeader {
		return fmt.Errorf("%d job and %d card records take %d bytes, the slot %d: %w", len(jobs), len(cards), len(body), spillSlot-spillHeader, ErrSpillFull)
	}
	slot := 1 - sp.slot
	buf := make([]byte, spillHeader+len(body))
	copy(buf, spillMagic)
	binary.BigEndian.PutUint64(buf[8:16], sp.gen+1)
	binary.BigEndian.PutUint32(buf[16:20], uint32(len(body)))
	binary.BigEndian.PutUint32(buf[20:24], crc32.ChecksumIEEE(body))
	copy(buf[spillHeader:], body)
	if _, err := sp.f.WriteAt(buf, int64(slot*spillSlot)); err != nil {
		return fmt.Errorf("writing %s: %w", SpillFile, err)
	}
	if err := sp.f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", SpillFile, err)
	}
	sp.gen++
	sp.slot = slot
	return nil
}
