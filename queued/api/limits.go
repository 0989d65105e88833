package api

import "time"

// Limits on requests, defined here once: the server refuses a request
// past one with a 400 naming the field and the limit, and the CLI checks
// what it can before it sends anything.
const (
	// DefaultMaxRequestBytes is the default bound of a request body
	// (TT_DEVICE_MAX_REQUEST_BYTES), the seed's 1 MiB.
	DefaultMaxRequestBytes = 1 << 20
	// DefaultMaxTimeoutSeconds is the default largest timeout a job may
	// ask for (TT_DEVICE_MAX_TIMEOUT), the seed's 86400 seconds.
	DefaultMaxTimeoutSeconds = 86400

	// MaxHoldReasonBytes and MaxSlurmJobIDBytes bound a hold's reason and
	// the Slurm job id it is taken for.
	MaxHoldReasonBytes = 1024
	MaxSlurmJobIDBytes = 64

	// MaxCmdBytes is the longest cmd: one argument to bash, which the
	// kernel caps at 128 KiB including its terminating NUL.
	MaxCmdBytes = 128<<10 - 1
	// MaxEnvVarBytes is the longest NAME=VALUE of env: one string of a
	// new program's environment, which the kernel caps as it caps cmd.
	MaxEnvVarBytes = MaxCmdBytes
	// MaxEnvBytes bounds a job's env in all (each NAME=VALUE plus its
	// terminating NUL, as exec passes them; see EnvBytes): with the
	// service's own environment and cmd it must fit the kernel's limit
	// on a new program's arguments and environment (a quarter of the
	// stack limit, 2 MiB by default), and in the request body limit (1
	// MiB by default).
	MaxEnvBytes = 512 << 10
	// MaxRecordBytes is a job's record budget: its cmd and its env (as
	// EnvBytes counts it) together. Each job's whole record is kept in
	// the store until retention deletes it (TT_DEVICE_MAX_COMPLETED_JOBS
	// of them, 10,000 by default: 2.5 GiB at most), and read whole only
	// for that one job: listing and the queue in memory keep a preview.
	MaxRecordBytes = 256 << 10
	// MaxRepeat bounds a job's repeat count; the specification leaves it
	// open, and an unbounded count would let one request hold a card
	// forever.
	MaxRepeat = 10000
	// MaxRetries bounds a job's retries (see QueueRequest.Retries): a
	// card that fails a job ten times over is not going to run it, and
	// each retry waits for the card's recovery, which may take minutes.
	MaxRetries = 10
	// MaxAfter bounds how many jobs one job may wait for
	// (QueueRequest.After): each is looked up at submission and at every
	// restart, and a chain longer than this is written as a chain.
	MaxAfter = 64
	// MaxClientIDBytes bounds client_id.
	MaxClientIDBytes = 256
	// MaxAgentBytes bounds agent, an MCP client's name: enough for any
	// agent's name, short enough for a status line.
	MaxAgentBytes = 64
	// DefaultLogChunk and MaxLogChunk bound one GET /logs answer.
	DefaultLogChunk = 64 << 10
	MaxLogChunk     = 1 << 20
	// MaxWait bounds the wait= of one long-poll; clients ask again.
	MaxWait = 60 * time.Second
	// MaxSeconds bounds every duration in seconds the wire or a setting
	// takes (a hold's expires_sec, each TT_DEVICE_* number of seconds):
	// ten years, far beyond any real one and far below time.Duration's
	// limit.
	MaxSeconds = 10 * 365 * 86400
	// MinIDPrefix is the shortest job id prefix the server resolves.
	MinIDPrefix = 6
)
