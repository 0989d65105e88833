package api

// HoldRequest is the body of POST /hold: take DeviceID's cards (one, or a
// list as for QueueRequest) in their FIFO turn and keep them, running
// nothing, until POST /release, the expiry, or, with SlurmJobID, the end
// of that Slurm job.
type HoldRequest struct {
	DeviceID string `json:"device_id"`
	// Reason says why, for status ("slurm job 4242", "firmware flash").
	Reason string `json:"reason,omitempty"`
	// ExpiresSec, when above 0, ends the hold that many seconds after it
	// is taken.
	ExpiresSec int64 `json:"expires_sec,omitempty"`
	// SlurmJobID is the Slurm job the hold is for.
	SlurmJobID string `json:"slurm_job_id,omitempty"`
	ClientID   string `json:"client_id,omitempty"`
	// ForUID, above 0, admins only, shared daemon: the hold is this user's
	// (the Slurm job's), who alone opens its cards under enforcement.
	ForUID int64 `json:"for_uid,omitempty"`
}

// HoldResponse answers POST /hold (201): the hold's id, its cards and its
// state, "queued" or "active".
type HoldResponse struct {
	HoldID   string `json:"hold_id"`
	DeviceID string `json:"device_id"`
	State    string `json:"state"`
	Position int    `json:"position"`
}

// ReleaseRequest is the body of POST /release: the hold HoldID, or every
// live hold taken for Slurm job SlurmJobID.
type ReleaseRequest struct {
	HoldID     string `json:"hold_id,omitempty"`
	SlurmJobID string `json:"slurm_job_id,omitempty"`
}

// ReleaseResponse answers POST /release with the holds it ended (the
// records as they read then: an active hold's ends as soon as its card
// lets go of it).
type ReleaseResponse struct {
	Released []Job `json:"released"`
}
