package server

import (
	"testing"

	"github.com/ttkit/ttkit/queued/scheduler"
)

// The Python tool's clients see its own words for a card's state: a
// recovering card is resetting, an unfit one healthy (its jobs are still
// taken and queued).
func TestPyState_SpeaksThePythonToolsWords(t *testing.T) {
	for st, want := range map[scheduler.CardState]string{
		scheduler.Healthy: "healthy", scheduler.Unfit: "healthy", scheduler.Recovering: "resetting", scheduler.Dead: "dead",
	} {
		if got := pyState(st); got != want {
			t.Errorf("pyState(%s) = %s, want %s", st, got, want)
		}
	}
}
