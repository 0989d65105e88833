package scheduler

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ttkit/ttkit/queued/store"
)

// lowWater sets how far below the budget a deletion round goes: to
// budget - budget/lowWater.
const lowWater = 16

// putBatch bounds the records one deletion round writes per transaction.
const putBatch = 500

// OutputStatus is the output kept on disk against its budget.
type OutputStatus struct {
	// Bytes is the size of every output file: finished jobs' and the
	// running jobs' so far.
	Bytes int64
	// Budget is Options.MaxOutputBytes.
	Budget int64
	// Deleted counts the finished jobs whose output was deleted since
	// start to keep Bytes within Budget.
	Deleted int
	// Warning is the last deletion round's problem, if any.
	Warning string
	// PerUserBudget is Options.MaxOutputBytesPerUser: what one owner's
	// finished jobs may keep.
	PerUserBudget int64
	// Top lists the owners whose finished jobs keep the most output,
	// most first (at most maxTopOwners): whose output fills the budget.
	Top []OwnerBytes
}

// OwnerBytes is the output one owner's finished jobs keep.
type OwnerBytes struct {
	UID   uint32
	Bytes int64
}

// outputBudget keeps the output files within Options.MaxOutputBytes, and
// each owner's within Options.MaxOutputBytesPerUser. It knows the size and
// owner of every finished job's file: counted at start, and as each job
// ends. When an owner's finished jobs keep more than their share, that
// owner's oldest files are deleted first, down to 15/16 of the share, so
// one user's verbose jobs push out their own history, not everyone's
// (Options.Exempt's owners are held only to the total). When the total
// with the running jobs' output is over the budget, the oldest finished
// jobs' files are deleted first, down to 15/16 of the budget; a queued or
// running job's file never is. Each deleted file's record first gets
// OutputDeletedAt, durably, so no answer ever shows output that is gone
// without saying why. Rounds run in the retention goroutine, so they never
// race with retention deleting the same records. The fields are guarded by
// mu, which is taken after core.mu, never before it.
type outputBudget struct {
	core      *core
	mu        sync.Mutex
	kick      chan struct{} // capacity 1; made on first use
	pending   []endedFile   // jobs ended since the last round, to be counted
	ending    int64         // the sizes of the ended jobs' files not yet counted, for status
	files     map[string]keptFile
	order     []orderedFile // oldest first; an entry is stale once its file is gone or counted again
	next      uint64
	bytes     int64            // total size of files
	byOwner   map[uint32]int64 // size of the files of each owner's jobs
	deleted   int
	warning   string // the last round's problem
	uncounted string // why the files found at start could not be counted
}

// keptFile is one finished job's output file.
type keptFile struct {
	size  int64
	seq   uint64 // its place in order
	owner uint32 // its job's owner, when owned
	owned bool
}

// endedFile is a job that ended and the size of its output then.
type endedFile struct {
	id    string
	size  int64
	owner *uint32 // whose the job is, as its record says; nil for none
}

type orderedFile struct {
	id  string
	seq uint64
}

// kickLocked returns the channel that starts a round.
func (b *outputBudget) kickLocked() chan struct{} {
	if b.kick == nil {
		b.kick = make(chan struct{}, 1)
	}
	return b.kick
}

func (b *outputBudget) kicked() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kickLocked()
}

// ended notes that a job's output file, of size bytes, is complete and
// starts a round; the worker calls it as the job ends, when the job's
// output leaves the running jobs' count. Status counts size until the
// round counts the file itself. owner is the job's owner (nil for none)
// as its record in memory says, so that the round need not read each
// record again from the store to learn it (issue 41).
func (b *outputBudget) ended(id string, size int64, owner *uint32) {
	b.mu.Lock()
	b.pending = append(b.pending, endedFile{id, size, owner})
	b.ending += size
	k := b.kickLocked()
	b.mu.Unlock()
	select {
	case k <- struct{}{}:
	default:
	}
}

// addLocked counts a file as the newest, its job owned by owners[id]
// when owners has it.
func (b *outputBudget) addLocked(id string, size int64, owners map[string]uint32) {
	b.removeLocked(id)
	if b.files == nil {
		b.files, b.byOwner = map[string]keptFile{}, map[uint32]int64{}
	}
	b.next++
	f := keptFile{size: size, seq: b.next}
	f.owner, f.owned = owners[id]
	b.files[id] = f
	b.order = append(b.order, orderedFile{id, b.next})
	b.bytes += size
	if f.owned {
		b.byOwner[f.owner] += size
	}
}

// removeLocked forgets a file; its order entry goes stale.
func (b *outputBudget) removeLocked(id string) {
	if f, ok := b.files[id]; ok {
		b.bytes -= f.size
		if f.owned {
			if b.byOwner[f.owner] -= f.size; b.byOwner[f.owner] <= 0 {
				delete(b.byOwner, f.owner)
			}
		}
		delete(b.files, id)
	}
}

// owners reads the owners of ids' jobs; without them (a store that
// cannot be read) the files count toward the total alone.
func (b *outputBudget) owners(ids []string) map[string]uint32 {
	if len(ids) == 0 {
		return nil
	}
	owners, err := b.core.st.Owners(ids)
	if err != nil {
		b.core.log.Warn("output budget: cannot read whose the output files are; they count toward the total alone", "err", err)
	}
	return owners
}

// overShare lists by how much each owner's files are over their share
// (Options.MaxOutputBytesPerUser), down to its low-water mark; exempt
// owners are left out. It may read the user database.
func (b *outputBudget) overShare() map[uint32]int64 {
	share := b.core.opt.MaxOutputBytesPerUser
	b.mu.Lock()
	var over []OwnerBytes
	for uid, n := range b.byOwner {
		if n > share {
			over = append(over, OwnerBytes{uid, n})
		}
	}
	b.mu.Unlock()
	need := map[uint32]int64{}
	for _, o := range over {
		if !b.core.opt.Exempt(o.UID) {
			need[o.UID] = o.Bytes - (share - share/lowWater)
		}
	}
	return need
}

// forget forgets files that retention deleted with their records.
func (b *outputBudget) forget(ids []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		b.removeLocked(id)
	}
}

// oldest lists the counted files oldest first, dropping stale entries.
func (b *outputBudget) oldest() []orderedFile {
	b.mu.Lock()
	defer b.mu.Unlock()
	live := b.order[:0]
	for _, o := range b.order {
		if f, ok := b.files[o.id]; ok && f.seq == o.seq {
			live = append(live, o)
		}
	}
	clear(b.order[len(live):])
	b.order = live
	return append([]orderedFile(nil), live...)
}

// kickSoon starts a round soon.
func (b *outputBudget) kickSoon() {
	b.mu.Lock()
	k := b.kickLocked()
	b.mu.Unlock()
	select {
	case k <- struct{}{}:
	default:
	}
}

func (b *outputBudget) limit() int64 {
	return b.core.opt.MaxOutputBytes
}

// statusLocked is the status of the budget; core.mu is held.
func (b *outputBudget) statusLocked() OutputStatus {
	running := b.runningLocked()
	b.mu.Lock()
	defer b.mu.Unlock()
	warning := b.warning
	if b.uncounted != "" {
		warning = strings.TrimPrefix(warning+"; "+b.uncounted, "; ")
	}
	st := OutputStatus{Bytes: b.bytes + b.ending + running, Budget: b.limit(), Deleted: b.deleted, Warning: warning,
		PerUserBudget: b.core.opt.MaxOutputBytesPerUser}
	for uid, n := range b.byOwner {
		st.Top = append(st.Top, OwnerBytes{uid, n})
	}
	slices.SortFunc(st.Top, func(x, y OwnerBytes) int { return cmp.Or(cmp.Compare(y.Bytes, x.Bytes), cmp.Compare(x.UID, y.UID)) })
	if len(st.Top) > maxTopOwners {
		st.Top = st.Top[:maxTopOwners]
	}
	return st
}

// runningLocked is the output the running jobs have written so far.
func (b *outputBudget) runningLocked() int64 {
	var n int64
	for _, c := range b.core.cards {
		if c.current != nil && c.current.log != nil {
			n += c.current.log.State().Disk
		}
	}
	return n
}

// count counts the output files found at start, oldest (by
// modification time) first. Files of jobs still queued or running are
// counted when they end.
func (b *outputBudget) count() {
	s := b.core
	entries, err := s.settledOutputs()
	if err != nil {
		b.mu.Lock()
		b.uncounted = fmt.Sprintf("output budget: the output files found at start are not counted: %v", err)
		b.mu.Unlock()
		s.log.Warn("output budget: cannot count the output files", "dir", s.opt.OutputDir, "err", err)
		return
	}
	type found struct {
		id   string
		size int64
		mod  int64
	}
	var files []found
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		files = append(files, found{e.id, fi.Size(), fi.ModTime().UnixNano()})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod < files[j].mod })
	ids := make([]string, len(files))
	for i, f := range files {
		ids[i] = f.id
	}
	owners := b.owners(ids)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range files {
		if _, counted := b.files[f.id]; !counted { // ended meanwhile: counted already
			b.addLocked(f.id, f.size, owners)
		}
	}
}

// enforce counts the files of the jobs that ended and, while
// the total is over the budget, deletes the oldest finished jobs' files.
// Nothing is deleted while writes fail: the records could not say so.
func (b *outputBudget) enforce() {
	s := b.core
	b.mu.Lock()
	pending := b.pending
	b.pending = nil
	b.mu.Unlock()
	owners := map[string]uint32{}
	for _, e := range pending {
		if e.owner != nil {
			owners[e.id] = *e.owner
		}
	}
	for _, e := range pending {
		fi, err := os.Stat(s.outputPath(e.id))
		// The file takes the place of the size noted at the job's end,
		// under one lock, so status never counts it twice or not at all.
		b.mu.Lock()
		if err == nil {
			b.addLocked(e.id, fi.Size(), owners)
		}
		b.ending -= e.size
		b.mu.Unlock()
	}
	s.mu.Lock()
	failing := s.persist.err != nil
	running := b.runningLocked()
	s.mu.Unlock()
	budget := b.limit()
	b.mu.Lock()
	total := b.bytes + running
	b.mu.Unlock()
	if failing {
		return
	}
	need := b.overShare()
	if total <= budget && len(need) == 0 {
		b.mu.Lock()
		b.warning = ""
		b.mu.Unlock()
		return
	}
	// Down to the low-water mark, so a busy queue at its budget deletes
	// (and writes records) once every few jobs, not after each one.
	var over int64
	if total > budget {
		over = total - (budget - budget/lowWater)
	}
	now := s.opt.Now()
	var problems []string
	var marks []store.Job        // records to mark, then files to delete
	var gone []string            // records already marked or deleted: files to delete
	whose := map[uint32]string{} // the names of the owners over their share
	for _, o := range b.oldest() {
		b.mu.Lock()
		f := b.files[o.id]
		b.mu.Unlock()
		mine := f.owned && need[f.owner] > 0 // its owner is over their share
		if !mine && over <= 0 {
			if len(need) == 0 {
				break
			}
			continue
		}
		s.mu.Lock()
		active := s.jobs[o.id] != nil
		s.mu.Unlock()
		if active {
			continue // queued, running, or its end not yet durable
		}
		rec, err := s.st.Brief(o.id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			gone = append(gone, o.id) // its record was pruned; only the file was left
		case err != nil:
			problems = append(problems, fmt.Sprintf("reading job %s: %v", o.id, err))
			continue
		case rec.State != store.StateDone:
			continue
		case rec.OutputDeletedAt.IsZero():
			rec.OutputDeletedAt = now
			marks = append(marks, rec)
		default:
			gone = append(gone, o.id)
		}
		over -= f.size
		if mine {
			if need[f.owner] -= f.size; need[f.owner] <= 0 {
				delete(need, f.owner)
			}
			if err == nil {
				whose[f.owner] = rec.Owner
			}
		}
	}
	deleted, freed := 0, int64(0)
	remove := func(id string) {
		err := os.Remove(s.outputPath(id))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			problems = append(problems, fmt.Sprintf("removing output of %s: %v", id, err))
			return
		}
		b.mu.Lock() // the bytes and the count move together, as status reads them
		freed += b.files[id].size
		b.removeLocked(id)
		b.deleted++
		b.mu.Unlock()
		deleted++
	}
	for _, id := range gone {
		remove(id)
	}
	for len(marks) > 0 {
		batch := marks[:min(len(marks), putBatch)]
		marks = marks[len(batch):]
		if err := s.st.Put(batch...); err != nil {
			problems = append(problems, fmt.Sprintf("marking %d jobs' output deleted: %v", len(batch), err))
			break
		}
		for _, rec := range batch {
			remove(rec.ID)
		}
	}
	b.mu.Lock()
	b.warning = ""
	if len(problems) > 0 {
		if len(problems) > 3 {
			problems = append(problems[:3], fmt.Sprintf("and %d more", len(problems)-3))
		}
		b.warning = "output budget: " + strings.Join(problems, "; ")
	}
	kept, warning := b.bytes, b.warning
	b.mu.Unlock()
	if deleted > 0 {
		s.log.Info("deleted the output of the oldest finished jobs to keep output within TT_DEVICE_MAX_OUTPUT_BYTES, and each user's within TT_DEVICE_MAX_OUTPUT_BYTES_PER_USER",
			"jobs", deleted, "bytes", freed, "kept_bytes", kept+running, "budget", budget, "users_over_their_share", ownersText(whose))
	}
	if warning != "" {
		s.log.Warn("output budget problems", "warning", warning)
	}
}

// ownersText names the owners whose output was deleted for their share,
// as "alice (uid 1001), bob (uid 1002)"; "none" when there are none.
func ownersText(whose map[uint32]string) string {
	if len(whose) == 0 {
		return "none"
	}
	uids := make([]uint32, 0, len(whose))
	for uid := range whose {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	parts := make([]string, len(uids))
	for i, uid := range uids {
		parts[i] = fmt.Sprintf("%s (uid %d)", whose[uid], uid)
	}
	return strings.Join(parts, ", ")
}
