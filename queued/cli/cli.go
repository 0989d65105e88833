// Package cli is tt-device-queue, the command line of queued: one kong
// command struct per file (*_cmd.go), global options in Globals, and Main,
// which parses, runs the command and turns its error into the exit status.
// It talks to the daemon only through the typed client in queued/api.
//
// Exit statuses: the job's own for run and result (a signal N, recorded
// as -N, becomes 128+N); 0 for success; 1 when the daemon refused the
// request (the message is the daemon's, on one line; a shared daemon's
// 403 for another user's job is one) and when it cannot be reached (the
// message says how to start it), as the Python tt-device-queue exits; 2
// for usage errors; 124 when a local wait timed out; 130 when interrupted.
// Neither of the last two stops the job.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/ttkit/ttkit/queued/config"
	"github.com/ttkit/ttkit/queued/version"
)

// Name is the command's name in messages, help and completion scripts.
const Name = "tt-device-queue"

// Globals are the options that come before the subcommand. The
// environment variables set their defaults.
type Globals struct {
	Version  kong.VersionFlag `help:"Print the version and exit."`
	Host     string           `env:"TT_DEVICE_URL" placeholder:"HOST|URL" help:"Daemon: unix:///path/to/queued.sock (no token), or a host or URL such as http://127.0.0.1:5741 (the token is sent only once the server there proves it is your queued). Default: your queued's socket in its state directory when it answers, else the host's shared queued at /run/tt-device-queue/queued.sock; never TCP."`
	Port     int              `env:"TT_DEVICE_PORT" placeholder:"PORT" help:"Daemon TCP port on --host (default 5741 once --host is given)."`
	ClientID string           `name:"client-id" env:"TT_QUEUE_CLIENT_ID" placeholder:"NAME" help:"Name recorded on submitted jobs (default: your user name); list --mine selects by it. It never changes their order."`
	JSON     bool             `name:"json" help:"Print machine-readable JSON only."`
}

// CLI is the whole command line.
type CLI struct {
	Globals

	Run         RunCmd         `cmd:"" help:"Submit a shell program, stream its output and exit with its status."`
	Queue       QueueCmd       `cmd:"" help:"Submit a shell program and print its job id."`
	Job         JobCmd         `cmd:"" help:"Show a job's record."`
	Result      ResultCmd      `cmd:"" help:"Wait for a job to end, print its output and exit with its status."`
	Logs        LogsCmd        `cmd:"" help:"Print a job's output, or follow it as it is produced."`
	QueuePython QueuePythonCmd `cmd:"" name:"queue-python" help:"Submit a Python script (a file, or - for stdin)."`
	Watch       WatchCmd       `cmd:"" help:"Show the cards live in the terminal (state, running job, its last lines, queue, holders) until q; one snapshot when stdout is not a terminal."`
	Status      StatusCmd      `cmd:"" help:"Show which queued answered, then every card: state, current job and its owner, queue, estimated wait, resets and foreign holders."`
	List        ListCmd        `cmd:"" help:"List jobs: running and queued ones card by card, then finished ones, newest first."`
	Wait        WaitCmd        `cmd:"" help:"Wait until jobs have ended and exit with the worst status among them."`
	Kill        KillCmd        `cmd:"" help:"Stop jobs: a queued one at once, a running one with SIGINT, then SIGTERM, then SIGKILL."`
	Resubmit    ResubmitCmd    `cmd:"" help:"Queue a new job with another job's program, directory, environment, timeout and repeat."`
	Reset       ResetCmd       `cmd:"" help:"Schedule a card reset: one card, the card of a job, or every card."`
	Hold        HoldCmd        `cmd:"" help:"Take cards in their turn and keep them, running nothing, until released (Slurm, maintenance)."`
	Gate        GateCmd        `cmd:"" help:"Run the fitness gate on cards now (the site probe included) and say whether each is fit (exit 0) or not (exit 3)."`
	Release     ReleaseCmd     `cmd:"" help:"End a hold, or every hold taken for a Slurm job."`
	HoldStatus  HoldStatusCmd  `cmd:"" name:"hold-status" help:"Show a hold, or the hold of a Slurm job; --wait waits until it holds its cards."`
	Completion  CompletionCmd  `cmd:"" help:"Print a shell completion script."`
	Complete    CompleteCmd    `cmd:"" name:"__complete" hidden:"" help:"Print completion candidates (for the completion scripts)."`
	Import      ImportCmd      `cmd:"" help:"Import the Python tt-device-queue's jobs (its jobs.sqlite3) while queued is stopped."`
	Web         WebCmd         `cmd:"" help:"Print the address of the live status page (with its token); --open opens it."`
	Doctor      DoctorCmd      `cmd:"" help:"Check this host for queued and otelcol-tt (KMD, cards, reset and health check, /proc, queued) and say how to fix each problem."`
	Slurm       SlurmCmd       `cmd:"" help:"Join a Slurm cluster: slurm gres prints the gres.conf lines for this host's cards."`
	Mcp         McpCmd         `cmd:"" help:"Serve AI agents (Claude Code, Codex, Cursor) over MCP on stdio: their device jobs go through the queue."`
}

// Streams are the command's standard files. Terminal detection looks at
// Out and Err when they are *os.File.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// kongExit carries kong's request to exit (after --help) out of the
// parser, so that only main exits.
type kongExit int

// Main runs the command line args (without the program name) and returns
// the exit status. SIGINT and SIGTERM stop a local wait and give 130; they
// never stop a job.
func Main(args []string, s Streams) (code int) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			cancel(errInterrupted)
		case <-ctx.Done():
		}
	}()
	return run(ctx, args, s)
}

func run(ctx context.Context, args []string, s Streams) (code int) {
	var c CLI
	parser, err := kong.New(&c,
		kong.Name(Name),
		kong.Description("Submit jobs to queued, which runs them one at a time per Tenstorrent card, in submission order.\n\n"+
			"Exit status: the job's own for run and result (a signal N becomes 128+N); 1 when queued refused the request "+
			"(such as another user's job on a shared queued) or cannot be reached; "+
			"2 for usage errors; 124 when --wait-timeout ran out; 130 when interrupted. "+
			"Neither of the last two stops the job."),
		kong.Vars{
			"version": Name + " " + version.String(),
			// queued's settings the CLI reads too, with their declared defaults.
			"result_bytes": strconv.FormatInt(config.Default().ResultBytes, 10),
			"dev_dir":      config.Default().DevDir,
		},
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.Writers(s.Out, s.Err),
		kong.Exit(func(code int) { panic(kongExit(code)) }),
	)
	if err != nil {
		fmt.Fprintf(s.Err, "%s: %v\n", Name, err)
		return ExitUsage
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(kongExit)
			if !ok {
				panic(r)
			}
			code = int(e)
		}
	}()
	kctx, err := parser.Parse(args)
	if err != nil {
		// One line and where the usage is, on stderr so stdout stays clean
		// for whatever reads it (--json); the whole help is one flag away.
		help := Name + " --help"
		if cmd := commandOf(args); cmd != "" && parser.Model.Node != nil && findCommand(parser.Model.Node, cmd) {
			help = Name + " " + cmd + " --help"
		}
		fmt.Fprintf(s.Err, "%s: %s\n  `%s` shows the usage\n", Name, termLines(err.Error()), help)
		return ExitUsage
	}
	app := newApp(ctx, &c.Globals, s)
	defer app.close()
	err = kctx.Run(app)
	if err == nil {
		return ExitOK
	}
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Code: ExitRefused, Err: err}
	}
	if e.Err != nil {
		// The message may echo a field someone else chose (a daemon's
		// refusal, a job's directory): its control characters are escaped.
		app.progress.clear()
		fmt.Fprintf(s.Err, "%s: %s\n", Name, termLines(e.Err.Error()))
	}
	return e.Code
}

// commandOf is the subcommand among args: the first word that is neither
// a flag nor a global flag's value, before any "--".
func commandOf(args []string) string {
	for i, a := range args {
		if a == "--" {
			return ""
		}
		if !strings.HasPrefix(a, "-") && !globalValue(args, i) {
			return a
		}
	}
	return ""
}

// findCommand reports whether the model has a subcommand called name.
func findCommand(n *kong.Node, name string) bool {
	for _, c := range n.Children {
		if c.Name == name {
			return true
		}
	}
	return false
}

// globalValue reports whether args[i] is the value of a global flag that
// takes one (--host x, --port 1, --client-id x).
func globalValue(args []string, i int) bool {
	if i == 0 {
		return false
	}
	switch args[i-1] {
	case "--host", "--port", "--client-id":
		return true
	}
	return false
}
