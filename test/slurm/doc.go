// Package slurm runs queued under a real Slurm on this one host: munged,
// slurmctld and slurmd (Debian's slurm-wlm 22.05) started by the test with
// a configuration in a temporary directory, the node's cards described by
// `tt-device-queue slurm gres` over fake device files, and the Prolog,
// TaskProlog and Epilog of deploy/slurm talking to a system-mode queued.
// The tests show that a Slurm job and a queued job never hold one card at
// once, in either order, that the Epilog's reset runs, that a job whose
// slurmd died leaves no hold behind, and that otelcol-tt labels the Slurm
// job's process with its job id.
//
// They need root and the Slurm and munge binaries, so they sit behind the
// slurm build tag and run through `make slurm-e2e`; .ci/run installs the
// packages.
package slurm
