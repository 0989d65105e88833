package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ttkit/ttkit/queued/api"
)

// StatusInput is tt_status's input: nothing.
type StatusInput struct{}

// StatusOutput is tt_status's answer.
type StatusOutput struct {
	Cards []CardView `json:"cards" jsonschema:"Every card queued serves."`
}

// CardView is one card: its health, its running job, its queue and the
// processes holding it outside the queue.
type CardView struct {
	Device string `json:"device" jsonschema:"The card's number, what device takes."`
	State  string `json:"state" jsonschema:"healthy; unfit while its fitness gate holds its jobs (they stay queued); recovering during a reset; dead after a failed recovery."`
	Reason string `json:"reason,omitempty" jsonschema:"Why it is not healthy."`
	Worker string `json:"worker" jsonschema:"running, idle, paused: <why> or waiting: <why>."`
	// Running is the card's running job, reset or hold.
	Running          *QueuedView  `json:"running,omitempty" jsonschema:"The job, reset or hold running on the card."`
	Queue            []QueuedView `json:"queue" jsonschema:"The jobs, resets and holds waiting, in order."`
	EstimatedWaitSec float64      `json:"estimated_wait_sec" jsonschema:"The expected wait of a job queued now."`
	Holders          []string     `json:"holders,omitempty" jsonschema:"Processes holding the card outside the queue (pid and command)."`
	Reset            string       `json:"reset,omitempty" jsonschema:"The card's pending or running reset."`
}

// QueuedView is a job in a card's status.
type QueuedView struct {
	JobID            string  `json:"job_id"`
	Kind             string  `json:"kind" jsonschema:"job, reset or hold."`
	Command          string  `json:"command" jsonschema:"Its first 200 bytes."`
	Owner            string  `json:"owner,omitempty"`
	ClientID         string  `json:"client_id,omitempty"`
	Agent            string  `json:"agent,omitempty" jsonschema:"The AI agent that queued it, if one did."`
	Position         int     `json:"position,omitempty"`
	EstimatedWaitSec float64 `json:"estimated_wait_sec" jsonschema:"Expected wait (queued) or remaining run time (running)."`
}

// ResetInput is tt_reset's input.
type ResetInput struct {
	Device      string `json:"device,omitempty" jsonschema:"Reset this card (or cards: \"0,1\", \"0-3\"). Give device or job_id."`
	JobID       string `json:"job_id,omitempty" jsonschema:"Reset the card this job ran on, unless it was reset since."`
	NoInterrupt bool   `json:"no_interrupt,omitempty" jsonschema:"Let the card's running job finish first instead of stopping it."`
}

// ResetOutput is tt_reset's answer: one entry per card.
type ResetOutput struct {
	Resets []ResetView `json:"resets"`
}

// ResetView is what a reset request did on one card.
type ResetView struct {
	Device     string `json:"device"`
	ResetJobID string `json:"reset_job_id,omitempty" jsonschema:"The reset's job id: tt_job and tt_logs show it."`
	State      string `json:"state,omitempty"`
	Summary    string `json:"summary" jsonschema:"What happens on the card, in words."`
}

// addCardTools adds the tools about cards.
func (s *server) addCardTools(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: "tt_status", Title: "Cards and queues",
		Description: "Every card: its health (fitness), the running job and its owner and agent, the queue with estimated waits, holds, resets, and processes holding it outside the queue."}, s.status)
	mcp.AddTool(srv, &mcp.Tool{Name: "tt_reset", Title: "Reset a card",
		Description: "Schedule a reset of one card (device) or of the card a job ran on (job_id), and answer at once; " +
			"queued refuses to interrupt another user's job, as the CLI does. tt_status shows the reset."}, s.reset)
}

func (s *server) status(ctx context.Context, _ *mcp.CallToolRequest, _ StatusInput) (*mcp.CallToolResult, StatusOutput, error) {
	c, err := s.client()
	if err != nil {
		return nil, StatusOutput{}, err
	}
	st, err := c.Status(ctx)
	if err != nil {
		return nil, StatusOutput{}, s.fail(ctx, "reading queued's status", err)
	}
	out := StatusOutput{Cards: make([]CardView, 0, len(st.Cards))}
	var lines []string
	for _, cs := range st.Cards {
		v := CardView{Device: cs.DeviceID, State: cs.State, Reason: cs.Reason, Worker: cs.Worker, EstimatedWaitSec: cs.EstimatedWaitSec,
			Queue: make([]QueuedView, 0, len(cs.Pending))}
		line := fmt.Sprintf("card %s: %s, %s", cs.DeviceID, cs.State, cs.Worker)
		if cs.Reason != "" {
			line += " (" + oneLine(cs.Reason) + ")"
		}
		if cs.Current != nil {
			r := queuedView(*cs.Current)
			v.Running = &r
			line += "; running " + r.Kind + " " + r.JobID
			if r.Agent != "" {
				line += " (agent: " + r.Agent + ")"
			}
		}
		for _, p := range cs.Pending {
			v.Queue = append(v.Queue, queuedView(p))
		}
		line += fmt.Sprintf("; %d queued, a job queued now waits about %s", len(cs.Pending), seconds(cs.EstimatedWaitSec))
		for _, h := range cs.Foreign {
			v.Holders = append(v.Holders, fmt.Sprintf("pid %d: %s", h.PID, oneLine(h.CommandLine)))
		}
		if len(v.Holders) > 0 {
			line += fmt.Sprintf("; %d processes hold it outside the queue", len(v.Holders))
		}
		if cs.Reset != nil {
			v.Reset = fmt.Sprintf("reset %s %s", cs.Reset.JobID, cs.Reset.State)
			line += "; " + v.Reset
		}
		out.Cards = append(out.Cards, v)
		lines = append(lines, line)
	}
	return textResult(strings.Join(lines, "\n")), out, nil
}

func queuedView(j api.JobSummary) QueuedView {
	return QueuedView{JobID: j.ID, Kind: j.Kind, Command: j.Cmd, Owner: j.Owner, ClientID: j.ClientID, Agent: j.Agent,
		Position: j.Position, EstimatedWaitSec: j.EstimatedWaitSec}
}

func (s *server) reset(ctx context.Context, _ *mcp.CallToolRequest, in ResetInput) (*mcp.CallToolResult, ResetOutput, error) {
	req := api.ResetRequest{DeviceID: strings.TrimSpace(in.Device), JobID: strings.TrimSpace(in.JobID), NoInterrupt: in.NoInterrupt}
	switch {
	case req.DeviceID != "" && req.JobID != "":
		return nil, ResetOutput{}, errors.New("device and job_id: give one, not both")
	case req.DeviceID == "" && req.JobID == "":
		return nil, ResetOutput{}, errors.New("device or job_id: name the card to reset, or the job whose card it is (an agent does not reset every card at once)")
	case req.DeviceID != "":
		if _, err := api.ParseDevices(req.DeviceID); err != nil {
			return nil, ResetOutput{}, fmt.Errorf("device %q: %w", in.Device, err)
		}
	}
	c, err := s.client()
	if err != nil {
		return nil, ResetOutput{}, err
	}
	res, err := c.Reset(ctx, req)
	if err != nil {
		return nil, ResetOutput{}, s.fail(ctx, "resetting", err)
	}
	out := ResetOutput{Resets: make([]ResetView, 0, len(res.Resets))}
	lines := make([]string, 0, len(res.Resets))
	for _, e := range res.Resets {
		v := ResetView{Device: e.DeviceID, ResetJobID: e.ResetJobID, State: e.State, Summary: describeReset(e)}
		out.Resets = append(out.Resets, v)
		lines = append(lines, v.Summary)
	}
	return textResult(strings.Join(lines, "\n")), out, nil
}

// describeReset says what a reset request did on one card, in the CLI's
// words.
func describeReset(e api.ResetEntry) string {
	card := "card " + e.DeviceID + ": "
	switch {
	case e.Skipped:
		return card + "no reset: " + oneLine(e.Reason)
	case e.Coalesced:
		return fmt.Sprintf("%sa reset is already %s: %s (this request joined it)", card, e.State, e.ResetJobID)
	}
	s := fmt.Sprintf("%sreset %s %s", card, e.ResetJobID, e.State)
	switch {
	case e.InterruptedJobID != "" && e.OnHold:
		s += "; it ends hold " + e.InterruptedJobID
	case e.InterruptedJobID != "":
		s += "; it interrupts running job " + e.InterruptedJobID
	case e.WaitsForJobID != "" && e.OnHold:
		s += " behind hold " + e.WaitsForJobID + ", until it is released"
	case e.WaitsForJobID != "":
		owner := e.WaitsForOwner
		if owner == "" {
			owner = "another user"
		}
		s += fmt.Sprintf(" behind job %s of %s (only its owner or an admin may interrupt it)", e.WaitsForJobID, owner)
	}
	return s
}
