// Package procscan finds the host processes that hold an open handle to a
// Tenstorrent kernel-mode driver (KMD) device and names them.
//
// The KMD publishes, for every device, a file /proc/driver/tenstorrent/<n>/pids
// with one decimal PID per open file descriptor. A [Scanner] reads those files
// on every call to [Scanner.Scan], takes their union, and attaches to every PID
// an [Identity]: the sanitized command line and the friendly name derived from
// it, read from /proc/<pid> once and cached for as long as the same process
// holds the PID. The result says whether every device was read ([Result.Complete]),
// because a caller may only conclude that a process has gone away on the
// strength of a complete scan.
//
// No read can hold a scan for long: a read of /proc/<pid>/cmdline blocks
// while its process is stuck in the kernel, so identities are read on
// goroutines of their own, at most one per PID, and [Scanner.ScanContext]
// returns at its context's deadline even if a pids file never answers (see
// [Options.ReadTimeout], [Identity.Pending], [ScanTimeoutError]).
// [Options.Attribution] adds, in the same read, whose each holder is: its
// owner, the queued job whose marker its environment carries, and the Slurm
// job, container and Kubernetes pod its cgroup names ([Attribution]).
// [CheckPIDNamespace] tells whether a procfs is the reader's own namespace's,
// the only one in which the PIDs of the pids files mean anything.
//
// Both the OpenTelemetry receiver (tt_process, tt_process_count) and the queue
// daemon (which process holds this card?) use it, so it knows nothing about
// either: paths are options, and nothing here logs.
package procscan
