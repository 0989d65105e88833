package server

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ttkit/ttkit/queued/api"
)

// streams are the long-lived requests: the long-polls of GET /logs and
// GET /result (logs -f, run, wait) and the status page's GET /changes,
// asked with a wait. They have a budget of their own, apart from the
// handler slots that short requests (status, the page, /job,
// submissions) take: they do their bits of work in handlers of their own
// (work, as many as the short requests have, shared as fairly), and one
// user outside the reserve may have at most perUser of them open
// (TT_DEVICE_HTTP_WAITS_PER_USER). Past it the new stream is refused with
// a 503 naming the bound, never a short request: a user whose logs -f,
// wait and status page are open is still answered by their own queue.
// The reserve (see who) is held only to the connection bound, which
// every stream's connection counts in.
type streams struct {
	perUser int
	work    *slots

	mu     sync.Mutex
	byUser map[uint32]int

	open, refused atomic.Int64
}

func newStreams(perUser int, work *slots) *streams {
	return &streams{perUser: perUser, work: work, byUser: map[uint32]int{}}
}

// isStream reports whether r is a long-lived request: a GET of a
// long-poll path that asks to wait.
func isStream(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	p := r.URL.Path
	if !strings.HasPrefix(p, "/logs/") && !strings.HasPrefix(p, "/result/") && p != "/changes" {
		return false
	}
	w := r.URL.Query().Get("wait")
	return w != "" && strings.Trim(w, "0.") != ""
}

// BusyError is a request refused at one of the HTTP bounds; Bound names
// the setting that raises it, which the answer's api.HeaderBusyBound
// carries so a client can tell this 503 (worth asking again shortly) from
// one that is not (a store that cannot be written, a stop).
type BusyError struct {
	Bound string
	Msg   string
}

func (e *BusyError) Error() string { return e.Msg }

// begin counts a new stream of w's, or refuses it when w, outside the
// reserve, has perUser open already; end gives its place back.
func (st *streams) begin(w who) (end func(), err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !w.reserved && st.byUser[w.uid] >= st.perUser {
		st.refused.Add(1)
		return nil, &BusyError{Bound: "TT_DEVICE_HTTP_WAITS_PER_USER", Msg: fmt.Sprintf(
			"too many streams: uid %d has %d long-lived requests open (logs -f, run, wait, the status page's change feed), "+
				"the most one user may have (TT_DEVICE_HTTP_WAITS_PER_USER=%d); end one of them and try again, "+
				"or raise TT_DEVICE_HTTP_WAITS_PER_USER in queued's environment", w.uid, st.byUser[w.uid], st.perUser)}
	}
	if !w.reserved {
		st.byUser[w.uid]++
	}
	st.open.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			st.mu.Lock()
			defer st.mu.Unlock()
			st.open.Add(-1)
			if !w.reserved {
				if st.byUser[w.uid]--; st.byUser[w.uid] <= 0 {
					delete(st.byUser, w.uid)
				}
			}
		})
	}, nil
}

// writeBusy answers a request refused at an HTTP bound: 503 with the
// bound's name in api.HeaderBusyBound and Retry-After, so clients ask
// again a little later rather than give up or hammer.
func writeBusy(w http.ResponseWriter, be *BusyError) {
	w.Header().Set(api.HeaderBusyBound, be.Bound)
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, be.Msg)
}
