package scheduler

import (
	"errors"
	"strings"
	"testing"
)

// An array counts each element against its owner's share of the queue,
// all or none: with a share of 2, an array of 3 is refused whole (none of
// it queued) and an array of 2 is taken; each element is an ordinary job
// with its index.
func TestSubmitArray_CountsEachElementAgainstTheShare(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.MaxQueued = 8 })
	release := b.holdCard(0)
	defer release()
	uid := uint32(1001)
	spec := JobSpec{Card: 0, Cmd: "echo $TT_QUEUE_ARRAY_INDEX", Cwd: b.work, OwnerUID: &uid, Owner: "alice", Array: []int{0, 1, 2}}
	_, err := b.s.SubmitArray(spec)
	if !errors.Is(err, ErrQueueFull) || !strings.Contains(err.Error(), "an array of 3 adds to them all or none") {
		t.Fatalf("an array of 3 with a share of 2: %v; want ErrQueueFull saying so", err)
	}
	if st := b.s.Status(); st.Queued != 0 {
		t.Fatalf("a refused array left %d jobs queued", st.Queued)
	}
	spec.Array = []int{5, 9}
	infos, err := b.s.SubmitArray(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].ArrayID == "" || infos[0].ArrayID != infos[1].ArrayID || infos[0].ArrayIndex != 5 || infos[1].ArrayIndex != 9 {
		t.Fatalf("an array of 2: %+v", infos)
	}
	release()
	if out := strings.TrimSpace(output(t, b, b.waitDone(infos[1].ID).ID)); out != "9" {
		t.Fatalf("element 9 printed %q", out)
	}
}
