package cli

import (
	"context"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/ttkit/ttkit/queued/api"
)

// The messages that drive watch's model.
type (
	// watchStatusMsg is a fresh status, read after the change feed spoke.
	watchStatusMsg struct{ st api.Status }
	// watchErrMsg is a failed read; the view keeps its last status.
	watchErrMsg struct{ err error }
	// watchTailMsg is a running job's last output lines.
	watchTailMsg struct {
		id    string
		lines []string
	}
	// watchTickMsg advances the elapsed times; it reads nothing.
	watchTickMsg time.Time
)

// watchModel is watch's bubbletea model: the frame it draws and how.
type watchModel struct {
	frame  watchFrame
	styles watchStyles
}

// watchTick asks for the next local clock tick, once a second, so that
// elapsed times move between changes. It never talks to the daemon.
func watchTick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return watchTickMsg(t) })
}

// Init starts the clock.
func (m *watchModel) Init() tea.Cmd { return watchTick() }

// Update takes a key, a new size, a status, output lines or a tick.
func (m *watchModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "Q", "ctrl+c", "esc":
			return m, tea.Quit
		}
	case tea.WindowSizeMsg:
		m.frame.width, m.frame.height = msg.Width, msg.Height
	case watchStatusMsg:
		m.frame.st, m.frame.err, m.frame.now = &msg.st, nil, time.Now()
		live := map[string]bool{}
		for _, c := range msg.st.Cards {
			if c.Current != nil {
				live[c.Current.ID] = true
			}
		}
		for id := range m.frame.tails {
			if !live[id] {
				delete(m.frame.tails, id)
			}
		}
	case watchErrMsg:
		m.frame.err = msg.err
	case watchTailMsg:
		m.frame.tails[msg.id] = msg.lines
	case watchTickMsg:
		m.frame.now = time.Time(msg)
		return m, watchTick()
	}
	return m, nil
}

// View draws the frame at the terminal's size.
func (m *watchModel) View() string {
	if m.frame.width == 0 {
		return ""
	}
	return m.frame.render(m.styles)
}

// watchFeed reads the daemon for the view: the status each time the
// change feed answers, and each running job's output as it comes, both
// by long-poll, and sends what it reads to the program.
type watchFeed struct {
	c     *api.Client
	lines int
	send  func(tea.Msg)
	// tails cancels the output readers, by job id.
	tails map[string]context.CancelFunc
}

// feedRetry is the pause before the feed asks again after a failed read
// (the daemon restarting, say).
const feedRetry = 2 * time.Second

// run follows the change feed until ctx ends.
func (f *watchFeed) run(ctx context.Context) {
	defer func() {
		for _, stop := range f.tails {
			stop()
		}
	}()
	var since *uint64
	for ctx.Err() == nil {
		gen, err := f.c.Changes(ctx, since, api.MaxWait)
		if err == nil {
			var st api.Status
			if st, err = f.c.Status(ctx); err == nil {
				f.send(watchStatusMsg{st})
				f.follow(ctx, st)
				since = &gen
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		f.send(watchErrMsg{err})
		since = nil
		t := time.NewTimer(feedRetry)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// follow starts an output reader for each running job that has none and
// stops those of jobs no longer running.
func (f *watchFeed) follow(ctx context.Context, st api.Status) {
	if f.lines == 0 {
		return
	}
	live := map[string]bool{}
	for _, c := range st.Cards {
		j := c.Current
		if !hasOutput(j) {
			continue
		}
		live[j.ID] = true
		if _, ok := f.tails[j.ID]; !ok {
			tctx, stop := context.WithCancel(ctx)
			f.tails[j.ID] = stop
			go f.tail(tctx, j.ID)
		}
	}
	for id, stop := range f.tails {
		if !live[id] {
			stop()
			delete(f.tails, id)
		}
	}
}

// tail sends a job's last lines each time its output grows, until the
// job ends or ctx does.
func (f *watchFeed) tail(ctx context.Context, id string) {
	head, err := f.c.Logs(ctx, id, api.LogsQuery{Limit: 1})
	if err != nil {
		return
	}
	off := max(0, head.Size-tailBytes)
	var buf []byte
	for ctx.Err() == nil {
		ch, err := f.c.Logs(ctx, id, api.LogsQuery{Offset: off, Limit: api.MaxLogChunk, Wait: api.MaxWait})
		if err != nil {
			return
		}
		if len(ch.Data) > 0 {
			buf = append(buf, ch.Data...)
			if len(buf) > tailBytes {
				buf = buf[len(buf)-tailBytes:]
			}
			f.send(watchTailMsg{id, tailLines(buf, f.lines)})
		}
		off = ch.NextOffset
		if ch.Done {
			return
		}
	}
}

// hasOutput reports whether j is a job with output of its own: not a
// reset or a hold.
func hasOutput(j *api.JobSummary) bool {
	return j != nil && j.Kind != "reset" && j.Kind != "hold"
}
