package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSpill_AppliedAtTheNextOpen: records spilled while the store failed
// are in the store after the next Open, with the command taken from the
// stored record; the spill is then empty.
func TestSpill_AppliedAtTheNextOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	running := job(1, StateRunning)
	running.Cmd, running.Env = "python3 train.py", map[string]string{"A": "b"}
	if err := s.Put(running); err != nil {
		t.Fatal(err)
	}
	done := running
	done.State, done.FinishedAt = StateDone, time.Now()
	code := 3
	done.ExitCode, done.Outcome = &code, OutcomeFailure
	dead := Card{ID: 0, State: CardDead, DeadReason: "health check failed", DeadSince: time.Now()}
	if err := s.Spill([]Card{dead}, done); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s2 := open(t, dir)
	got, err := s2.Job(running.ID)
	if err != nil || got.State != StateDone || *got.ExitCode != 3 || got.Cmd != "python3 train.py" || got.Env["A"] != "b" {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
	cards, _ := s2.Cards()
	if len(cards) != 1 || cards[0].State != CardDead {
		t.Fatalf("cards after reopen: %+v", cards)
	}
	s2.Close()
	// Applied once: a later Open finds nothing to apply (a record changed
	// meanwhile is not overwritten again).
	s3 := open(t, dir)
	if err := s3.PutCards(Card{ID: 0, State: CardHealthy}); err != nil {
		t.Fatal(err)
	}
	s3.Close()
	s4 := open(t, dir)
	if cards, _ := s4.Cards(); cards[0].State != CardHealthy {
		t.Fatalf("the spill was applied twice: %+v", cards)
	}
}

// TestSpill_NeverRevivesADoneJob and a torn newest slot falls back to the
// previous one.
func TestSpill_NeverRevivesADoneJobAndSurvivesATornWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	a, b := job(1, StateRunning), job(2, StateDone)
	code := 0
	b.ExitCode, b.FinishedAt = &code, time.Now()
	if err := s.Put(a, b); err != nil {
		t.Fatal(err)
	}
	stale := b
	stale.State, stale.FinishedAt, stale.ExitCode = StateQueued, time.Time{}, nil
	aDone := a
	aDone.State, aDone.FinishedAt, aDone.ExitCode = StateDone, time.Now(), &code
	if err := s.Spill(nil, aDone, stale); err != nil {
		t.Fatal(err)
	}
	// A newer spill torn by a crash: its slot fails its checksum.
	if err := s.Spill(nil, aDone); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, SpillFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("garbage"), int64(s.spill.slot*spillSlot+spillHeader)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s.Close()
	s2 := open(t, dir)
	if got, _ := s2.Job(a.ID); got.State != StateDone {
		t.Fatalf("job a after reopen: %+v; want the older slot applied", got)
	}
	if got, _ := s2.Job(b.ID); got.State != StateDone {
		t.Fatalf("job b after reopen: %+v; a done record must never become active again", got)
	}
}

// TestSpill_RefusesMoreThanASlot: records that do not fit are refused.
func TestSpill_RefusesMoreThanASlot(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	var jobs []Job
	for i := range 2000 {
		j := job(uint64(i+1), StateDone)
		j.Error = strings.Repeat("e", 400)
		jobs = append(jobs, j)
	}
	if err := s.Spill(nil, jobs...); !errors.Is(err, ErrSpillFull) {
		t.Fatalf("spilling %d large records: %v; want ErrSpillFull", len(jobs), err)
	}
	fi, err := os.Stat(filepath.Join(s.Dir(), SpillFile))
	if err != nil || fi.Size() != SpillBytes {
		t.Fatalf("reserve %v, %v; want %d bytes written at open", fi, err, SpillBytes)
	}
}
