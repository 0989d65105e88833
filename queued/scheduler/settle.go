package scheduler

import (
	"sync"

	"github.com/ttkit/ttkit/queued/store"
)

// A job's end commits while what it left is swept (runner.Spec.
// SettleLater); these wait for the sweep where it matters.

// waitSettled waits until what the last jobs of cards left is swept and
// their leaders reaped (runner.Spec.SettleLater): a job's end commits
// meanwhile, but nothing else runs on a card before. mu guards the
// cards' settled.
func waitSettled(mu *sync.Mutex, cards cardSet) {
	mu.Lock()
	var chans []<-chan struct{}
	for _, cd := range cards {
		if cd.settled != nil {
			chans = append(chans, cd.settled)
		}
	}
	mu.Unlock()
	for _, ch := range chans {
		<-ch
	}
}

// settleOnceSwept settles a job whose end is durable, once what it left
// is swept and its leader reaped (runner.Spec.SettleLater): whoever sees
// it done (a wait, a dependent job, a script that deletes its user next)
// finds its processes gone, as before its end committed during the
// sweep. c.mu is held.
func settleOnceSwept(c *core, j *job, rec store.Job) {
	if ch := j.swept; ch != nil {
		select {
		case <-ch:
		default:
			go func() {
				<-ch
				c.mu.Lock()
				defer c.mu.Unlock()
				c.settleLocked(j, rec)
			}()
			return
		}
	}
	c.settleLocked(j, rec)
}
