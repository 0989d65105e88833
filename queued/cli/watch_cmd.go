package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/ttkit/ttkit/queued/api"
)

// WatchCmd is a live full-screen view of the cards in the terminal, for
// people who watch a shared host over SSH: each card's state, running
// job or hold with owner and elapsed time, the job's last output lines,
// the queue and foreign holders. It redraws when the daemon's change
// feed (GET /changes) or a running job's output says something changed,
// never on a polling clock; only the elapsed times tick locally. When
// stdout is not a terminal it prints one plain snapshot and exits, so
// that `watch > file` or a pipe gets text rather than escape codes.
type WatchCmd struct {
	Lines int `default:"3" placeholder:"N" help:"Last output lines shown under each running job (0-20)."`
}

// maxWatchLines bounds --lines: the view is for glancing, logs -f is for
// reading.
const maxWatchLines = 20

// tailBytes is how much of a running job's output the view keeps to find
// its last lines in.
const tailBytes = 8 << 10

// Run shows the view until q or Ctrl-C, or prints one snapshot.
func (w *WatchCmd) Run(a *App) error {
	if w.Lines < 0 || w.Lines > maxWatchLines {
		return usageErr("--lines %d: want 0 to %d", w.Lines, maxWatchLines)
	}
	if a.JSON {
		return usageErr("watch has no --json; status --json is the machine-readable snapshot")
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	colour := os.Getenv("NO_COLOR") == ""
	if !isTerminal(a.Out) {
		return w.snapshot(a, c)
	}
	styles := newWatchStyles(lipgloss.NewRenderer(a.Out), colour)
	m := &watchModel{frame: watchFrame{at: a.url, tails: map[string][]string{}, now: time.Now()}, styles: styles}
	ctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithOutput(a.Out))
	f := &watchFeed{c: c, lines: w.Lines, send: p.Send, tails: map[string]context.CancelFunc{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.run(ctx)
	}()
	_, err = p.Run()
	cancel()
	wg.Wait()
	if err != nil {
		if cause := context.Cause(a.ctx); cause != nil {
			return a.explain(a.ctx, cause)
		}
		if errors.Is(err, tea.ErrInterrupted) {
			return nil
		}
		return fmt.Errorf("watch: %w", err)
	}
	return nil
}

// snapshot prints one plain frame: the status and each running job's
// last lines, unbounded in width and height and without colour.
func (w *WatchCmd) snapshot(a *App, c *api.Client) error {
	st, err := c.Status(a.ctx)
	if err != nil {
		return a.explain(a.ctx, err)
	}
	fr := watchFrame{at: a.url, st: &st, tails: map[string][]string{}, now: time.Now()}
	for _, card := range st.Cards {
		if j := card.Current; hasOutput(j) {
			if lines, err := lastLines(a.ctx, c, j.ID, w.Lines); err == nil {
				fr.tails[j.ID] = lines
			}
		}
	}
	styles := newWatchStyles(lipgloss.NewRenderer(a.Out), false)
	_, err = fmt.Fprintln(a.Out, fr.render(styles))
	return err
}

// lastLines reads the last n lines of a job's output as it stands.
func lastLines(ctx context.Context, c *api.Client, id string, n int) ([]string, error) {
	if n == 0 {
		return nil, nil
	}
	head, err := c.Logs(ctx, id, api.LogsQuery{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("reading the output of job %s: %w", id, err)
	}
	ch, err := c.Logs(ctx, id, api.LogsQuery{Offset: max(0, head.Size-tailBytes), Limit: tailBytes})
	if err != nil {
		return nil, fmt.Errorf("reading the output of job %s: %w", id, err)
	}
	return tailLines(ch.Data, n), nil
}
