package store

import (
	"testing"
	"time"
)

func TestRecent_NewestFinishedFirst(t *testing.T) {
	s := open(t, t.TempDir())
	var done []Job
	for i := range 5 {
		j := job(uint64(i+1), StateDone)
		// Finished out of submission order: 3, 1, 4, 0, 2 seconds.
		j.FinishedAt = time.Unix(2000+int64([]int{3, 1, 4, 0, 2}[i]), 0).UTC()
		done = append(done, j)
	}
	if err := s.Put(append(done, job(6, StateQueued))...); err != nil {
		t.Fatal(err)
	}
	got, err := s.Recent(3)
	if err != nil {
		t.Fatal(err)
	}
	if want := ids([]Job{done[2], done[0], done[4]}); ids(got) != want {
		t.Fatalf("Recent(3) = %s, want %s", ids(got), want)
	}
	if all, _ := s.Recent(100); len(all) != 5 {
		t.Fatalf("Recent(100) = %d records, want the 5 finished", len(all))
	}
	if none, err := s.Recent(0); err != nil || len(none) != 0 {
		t.Fatalf("Recent(0) = %d, %v", len(none), err)
	}
}
