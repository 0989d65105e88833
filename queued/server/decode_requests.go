package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/store"
)

// The decoders of the request bodies that queue a job and schedule a
// reset, built on decode.go's field readers.

// decodeQueue validates a POST /queue body into a job spec.
func (h *submissions) decodeQueue(r *http.Request) (scheduler.JobSpec, error) {
	var spec scheduler.JobSpec
	fields, err := readObject(r, queueRequestFields)
	if err != nil {
		return spec, err
	}
	// The Python tt-device-queue's clients send mode "run", its only mode.
	if mode, ok, err := stringField(fields, "mode"); err != nil {
		return spec, err
	} else if ok && mode != "run" {
		return spec, fieldErr("mode", "%q: the only mode is \"run\" (a reset is POST /reset)", cut(mode, 40))
	}

	cmd, ok, err := stringField(fields, "cmd")
	switch {
	case err != nil:
		return spec, err
	case !ok || strings.TrimSpace(cmd) == "":
		return spec, fieldErr("cmd", "required: one shell program")
	case len(cmd) > api.MaxCmdBytes:
		return spec, fieldErr("cmd", "%d bytes, the limit is %d", len(cmd), api.MaxCmdBytes)
	case strings.ContainsRune(cmd, 0):
		return spec, fieldErr("cmd", "contains a NUL byte")
	}
	spec.Cmd = cmd

	cwd, ok, err := stringField(fields, "cwd")
	if err == nil && (!ok || cwd == "") {
		// Optional, as in the Python tt-device-queue's API.
		cwd, err = h.rules.defaultCwd(r)
	}
	switch {
	case err != nil:
		return spec, err
	case strings.ContainsRune(cwd, 0):
		return spec, fieldErr("cwd", "contains a NUL byte")
	case !filepath.IsAbs(cwd):
		return spec, fieldErr("cwd", "%q is not an absolute path", cwd)
	}
	// Looked at here only where the rules let queued look (not on a
	// shared daemon, which is root); otherwise the job checks it when it
	// starts, as its user.
	if h.rules.probesCwd() {
		if fi, err := h.cwd.probeDir(cwd); errors.Is(err, errProbeHangs) {
			return spec, fieldErr("cwd", "%q: %v", cwd, err)
		} else if err != nil {
			return spec, fieldErr("cwd", "%q: %v", cwd, errors.Unwrap(err))
		} else if !fi.IsDir() {
			return spec, fieldErr("cwd", "%q is not a directory", cwd)
		}
	}
	spec.Cwd = filepath.Clean(cwd)

	cards, text, err := decodeDevices(fields, h.sched.Cards())
	if err != nil {
		return spec, err
	}
	spec.Card = cards[0]
	if len(cards) > 1 {
		spec.Cards, spec.DeviceSpec = cards, text
	}

	if raw, ok := fields["env"]; ok && !isNull(raw) {
		env, ok := stringMap(raw)
		if !ok {
			if jsonType(raw) == "an object" {
				return spec, fieldErr("env", "want string values")
			}
			return spec, fieldErr("env", "want an object of NAME: value strings, got %s", jsonType(raw))
		}
		if total := api.EnvBytes(env); total > api.MaxEnvBytes {
			return spec, fieldErr("env", "%d bytes in all (NAME=VALUE and a NUL each), the limit is %d", total, api.MaxEnvBytes)
		}
		names := make([]string, 0, len(env))
		for k := range env {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			switch v := env[k]; {
			case !api.ValidEnvName(k):
				return spec, fieldErr("env", "%q is not a variable name (letters, digits, _; not starting with a digit)", k)
			case api.ReservedEnv(k):
				return spec, fieldErr("env", "%s is set by the queue", k)
			case strings.ContainsRune(v, 0):
				return spec, fieldErr("env", "%s: value contains a NUL byte", k)
			case len(k)+1+len(v) > api.MaxEnvVarBytes:
				return spec, fieldErr("env", "%s: longer than %d bytes", k, api.MaxEnvVarBytes)
			}
		}
		if len(env) > 0 {
			spec.Env = env
		}
	}
	if err := overBudget("env", "", spec.Cmd, spec.Env, "send fewer or smaller variables"); err != nil {
		// Only env can take a record past it: cmd alone is bounded lower.
		return spec, err
	}
	if spec.EnvFromShell, err = decodeEnvFromShell(fields, spec.Env); err != nil {
		return spec, err
	}

	timeout, _, err := intField(fields, "timeout")
	maxTimeout := int64(h.maxTimeout / time.Second)
	switch {
	case err != nil:
		return spec, err
	case timeout < 0:
		return spec, fieldErr("timeout", "%d is negative; 0 or omitted selects the default", timeout)
	case timeout > maxTimeout:
		return spec, fieldErr("timeout", "%d seconds is above the maximum %d (TT_DEVICE_MAX_TIMEOUT)", timeout, maxTimeout)
	}
	spec.Timeout = time.Duration(timeout) * time.Second

	repeat, _, err := intField(fields, "repeat")
	switch {
	case err != nil:
		return spec, err
	case repeat < 0:
		return spec, fieldErr("repeat", "%d is negative", repeat)
	case repeat > api.MaxRepeat:
		return spec, fieldErr("repeat", "%d is above the maximum %d", repeat, api.MaxRepeat)
	}
	spec.Repeat = int(max(repeat, 1))

	idle, _, err := intField(fields, "idle_timeout")
	switch {
	case err != nil:
		return spec, err
	case idle < 0:
		return spec, fieldErr("idle_timeout", "%d is negative; 0 or omitted selects the default (TT_DEVICE_IDLE_TIMEOUT)", idle)
	case idle > maxTimeout:
		return spec, fieldErr("idle_timeout", "%d seconds is above the maximum %d (TT_DEVICE_MAX_TIMEOUT)", idle, maxTimeout)
	}
	spec.IdleTimeout = time.Duration(idle) * time.Second

	retries, _, err := intField(fields, "retries")
	switch {
	case err != nil:
		return spec, err
	case retries < 0 || retries > api.MaxRetries:
		return spec, fieldErr("retries", "%d: want 0 to %d", retries, api.MaxRetries)
	}
	spec.Retries = int(retries)

	clientID, _, err := stringField(fields, "client_id")
	switch {
	case err != nil:
		return spec, err
	case len(clientID) > api.MaxClientIDBytes:
		return spec, fieldErr("client_id", "%d bytes, the limit is %d", len(clientID), api.MaxClientIDBytes)
	case strings.IndexFunc(clientID, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return spec, fieldErr("client_id", "contains control characters")
	}
	spec.ClientID = clientID

	agent, _, err := stringField(fields, "agent")
	switch {
	case err != nil:
		return spec, err
	case len(agent) > api.MaxAgentBytes:
		return spec, fieldErr("agent", "%d bytes, the limit is %d", len(agent), api.MaxAgentBytes)
	case strings.IndexFunc(agent, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return spec, fieldErr("agent", "contains control characters")
	}
	spec.Agent = agent
	if spec.After, spec.AfterMode, err = h.decodeAfter(r, fields); err != nil {
		return spec, err
	}
	if array, ok, err := stringField(fields, "array"); err != nil {
		return spec, err
	} else if ok {
		if spec.Array, err = api.ParseArray(array); err != nil {
			return spec, fieldErr("array", "%v", err)
		}
	}
	return spec, nil
}

// decodeAfter reads after and after_mode: at most api.MaxAfter ids or
// unique prefixes, each resolved to a job the caller may see (in system
// mode their own, or any as an admin), and the mode, ok by default.
func (h *submissions) decodeAfter(r *http.Request, fields map[string]json.RawMessage) ([]string, store.AfterMode, error) {
	var ids []string
	if raw, ok := fields["after"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, "", fieldErr("after", "want a list of job ids, got %s", jsonType(raw))
		}
	}
	if len(ids) > api.MaxAfter {
		return nil, "", fieldErr("after", "%d jobs, the limit is %d", len(ids), api.MaxAfter)
	}
	mode, ok, err := stringField(fields, "after_mode")
	switch m := store.AfterMode(mode); {
	case err != nil:
		return nil, "", err
	case ok && m != store.AfterOK && m != store.AfterNotOK && m != store.AfterAny:
		return nil, "", fieldErr("after_mode", "%q: want ok, notok or any", cut(mode, 40))
	case ok && len(ids) == 0:
		return nil, "", fieldErr("after_mode", "%q without after: name the jobs to wait for", mode)
	}
	var whole []string
	for _, raw := range ids {
		info, err := h.jobFor(r, "after", raw, true)
		if err != nil {
			return nil, "", fmt.Errorf("after %q: %w", cut(raw, 40), err)
		}
		if !slices.Contains(whole, info.ID) {
			whole = append(whole, info.ID)
		}
	}
	return whole, store.AfterMode(mode), nil
}

// decodeDevice reads device_id: a string of digits or a JSON integer,
// "0" when absent, and it must name one of cards.
func decodeDevice(fields map[string]json.RawMessage, cards []int) (int, error) {
	raw, ok := fields["device_id"]
	if !ok || isNull(raw) {
		raw = json.RawMessage(`"0"`)
	}
	return parseDevice(raw, cards)
}

// decodeDevices reads device_id as a list of cards: one card as
// decodeDevice reads it, or a list such as "0,1" or "0-3" (api.ParseDevices);
// every card must be one of cards. It returns the cards ascending and the
// list as given (trimmed), "" for one card.
func decodeDevices(fields map[string]json.RawMessage, cards []int) ([]int, string, error) {
	raw, ok := fields["device_id"]
	if !ok || isNull(raw) {
		raw = json.RawMessage(`"0"`)
	}
	var text string
	if jsonType(raw) != "a string" || json.Unmarshal(raw, &text) != nil || !strings.ContainsAny(text, ",-") {
		n, err := parseDevice(raw, cards)
		return []int{n}, "", err
	}
	list, err := api.ParseDevices(text)
	if err != nil {
		return nil, "", fieldErr("device_id", "%v", err)
	}
	for _, n := range list {
		if !slices.Contains(cards, n) {
			return nil, "", fieldErr("device_id", "no card %d; the cards are %s (TT_DEVICE_IDS)", n, strings.ReplaceAll(api.FormatDevices(cards), ",", ", "))
		}
	}
	if len(list) == 1 {
		return list, "", nil
	}
	return list, strings.TrimSpace(text), nil
}

// decodeReset validates a POST /reset body: device_id (as for /queue),
// job_id (an id or unique prefix), or neither for every card, and the
// optional no_interrupt.
func (h *resets) decodeReset(r *http.Request) (scheduler.ResetRequest, error) {
	var req scheduler.ResetRequest
	fields, err := readOptionalObject(r, resetRequestFields)
	if err != nil {
		return req, err
	}
	// client_id is taken, and not used, as the Python tt-device-queue
	// takes it; it must still be a string.
	if _, _, err := stringField(fields, "client_id"); err != nil {
		return req, err
	}
	jobID, hasJob, err := stringField(fields, "job_id")
	if err != nil {
		return req, err
	}
	raw, hasDevice := fields["device_id"]
	hasDevice = hasDevice && !isNull(raw)
	switch {
	case hasJob && hasDevice:
		return req, fieldErr("job_id", "give device_id or job_id, not both (neither resets every card)")
	case hasDevice:
		cards, _, err := decodeDevices(fields, h.sched.Cards())
		if err != nil {
			return req, err
		}
		req.Card = &cards[0]
		if len(cards) > 1 {
			req.Cards = cards
		}
	case hasJob:
		id, err := h.resolve("job_id", jobID)
		if err != nil {
			return req, err
		}
		req.JobID = id
	}
	if raw, ok := fields["no_interrupt"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &req.NoInterrupt); err != nil {
			return req, fieldErr("no_interrupt", "want true or false, got %s", jsonType(raw))
		}
	}
	if raw, ok := fields["force"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &req.Force); err != nil {
			return req, fieldErr("force", "want true or false, got %s", jsonType(raw))
		}
	}
	return req, nil
}

// parseDevice reads a card number given as a string of digits or a JSON
// integer; it must name one of cards, the configured ones.
func parseDevice(raw json.RawMessage, cards []int) (int, error) {
	var text string
	switch jsonType(raw) {
	case "a string":
		if err := json.Unmarshal(raw, &text); err != nil {
			return 0, fieldErr("device_id", "unreadable string")
		}
		if text == "" {
			text = "0"
		}
	case "a number":
		text = string(bytes.TrimSpace(raw))
	default:
		return 0, fieldErr("device_id", "want a card number such as \"0\", got %s", jsonType(raw))
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < 0 || strconv.Itoa(n) != text {
		return 0, fieldErr("device_id", "%q is not a card number", text)
	}
	for _, c := range cards {
		if c == n {
			return n, nil
		}
	}
	names := make([]string, len(cards))
	for i, c := range cards {
		names[i] = strconv.Itoa(c)
	}
	return 0, fieldErr("device_id", "no card %d; the cards are %s (TT_DEVICE_IDS)", n, strings.Join(names, ", "))
}

// decodeEnvFromShell reads env_from_shell: the names of env entries the
// CLI took from the submitter's shell, each a key of env, listed once.
func decodeEnvFromShell(fields map[string]json.RawMessage, env map[string]string) ([]string, error) {
	raw, ok := fields["env_from_shell"]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal(raw, &names); err != nil {
		return nil, fieldErr("env_from_shell", "want an array of variable names, got %s", jsonType(raw))
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if _, ok := env[n]; !ok {
			return nil, fieldErr("env_from_shell", "%s is not in env", strconv.Quote(cut(n, 64)))
		}
		if seen[n] {
			return nil, fieldErr("env_from_shell", "%s is listed twice", n)
		}
		seen[n] = true
	}
	if len(names) == 0 {
		return nil, nil
	}
	sort.Strings(names)
	return names, nil
}

// overBudget refuses, as a 400 on field, a job record over the record
// budget (api.MaxRecordBytes): a submission's, or a resubmitted job's
// (whose, then, names) from a store older than the budget; fix says what
// to do instead.
func overBudget(field, whose, cmd string, env map[string]string, fix string) error {
	envBytes := api.EnvBytes(env)
	if len(cmd)+envBytes <= api.MaxRecordBytes {
		return nil
	}
	return fieldErr(field, "%scmd (%d bytes) and env (%d bytes) take %d bytes together, the limit of a job's record is %d; %s",
		whose, len(cmd), envBytes, len(cmd)+envBytes, api.MaxRecordBytes, fix)
}
