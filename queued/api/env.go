package api

// The variables queued sets in a job itself: the job's id and its card
// (every job), and the AI agent that queued it (an agent's job only, so
// otelcol-tt's attribution and the job can tell an agent's work from a
// person's). A request may not set them (the server refuses them in env,
// the CLI in --env), so a job can trust them.
const (
	JobIDEnvVar  = "TT_QUEUE_JOB_ID"
	DeviceEnvVar = "TT_QUEUE_DEVICE"
	AgentEnvVar  = "TT_QUEUE_AGENT"
)

// ReservedEnv reports whether name is one of the variables queued sets in
// a job itself (JobIDEnvVar, DeviceEnvVar, AgentEnvVar).
func ReservedEnv(name string) bool {
	return name == JobIDEnvVar || name == DeviceEnvVar || name == AgentEnvVar || name == ArrayIDEnvVar || name == ArrayIndexEnvVar
}

// ValidEnvName reports whether name may name a variable of a job's
// environment: a shell variable name (ASCII letters, digits and _, not
// starting with a digit), which any shell the job starts can read.
func ValidEnvName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return name != ""
}

// EnvBytes is what env takes of a new program's environment: each
// NAME=VALUE and its terminating NUL. A request's env may take at most
// MaxEnvBytes.
func EnvBytes(env map[string]string) int {
	n := 0
	for k, v := range env {
		n += len(k) + len(v) + 2
	}
	return n
}
