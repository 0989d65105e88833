// Package scheduler runs queued's jobs: one worker goroutine per card, each
// with its own FIFO, so a job on card 0 never waits for card 1. Only queued
// and running jobs (and finished ones whose record could not be written
// yet) live in memory; finished jobs are read from the store.
//
// # Parts
//
// A small core holds the cards (each a FIFO queue and a state machine:
// healthy, resetting, dead), the jobs in memory and the counts, under one
// lock (core.go, card.go, cardstate.go, job.go). Around it, each part is a
// type of its own in a file named after it:
//
//   - submitter (submit.go): takes jobs into the queues, and out by kill;
//   - jobIndex (lookup.go, list.go): finds jobs by id, prefix or filter;
//   - dispatcher (worker.go): each card's worker, start and end commits;
//   - launcher (launch.go): how a job or a reset runs, as whom, with what;
//   - resetDesk (reset.go): reset requests, coalesced, interrupting;
//   - resetRunner (resetrun.go): a reset settled; a card marked dead;
//   - the recovery ladder (ladder.go): a reset's rungs, each verified by
//     the health check and the gate, and the bound on automatic ladders;
//   - foreignWait (foreignwait.go): a reset waits for someone else's
//     process holding its card;
//   - restart (restart.go): the queues rebuilt from the store at start;
//   - retention (retention.go): old finished jobs deleted;
//   - outputBudget (outputbudget.go): output files within their budget;
//   - persister (persist.go): a failing store, held records, the retry;
//   - holderWatch (holders.go): who holds each card outside the queue;
//   - estimator (estimate.go): waits and run times from history;
//   - changeFeed (changes.go): the status page's change notifications;
//   - reporter (status.go) and the metrics (metrics.go): what is shown.
//
// Scheduler (scheduler.go) is the API: it starts and stops the parts and
// hands each request to the part that owns it.
//
// # Durability and the never-replay rule
//
// Every transition is written durably, through the store's group commit:
//
//   - submit: the queued record is committed before the submission is
//     answered. Its sequence number (its FIFO place) is taken in memory
//     first, and the worker starts a job only once its insert is durable,
//     so concurrent submitters cannot reorder a card's queue.
//   - start: the running record is committed BEFORE the process is
//     started. A crash after the start therefore always finds the job
//     "running" and ends it as interrupted; it is never run twice. A crash
//     between the commit and the start costs the job (it is reported
//     interrupted although it never ran), which is the safe side.
//   - finish: when job N ends, the worker commits N's done record and the
//     running record of the next job N+1 in ONE transaction, then starts
//     N+1. The rule holds (N+1's running is durable before its process
//     starts) and a busy card pays one fsync per job, not two, on its
//     critical path. N is reported done only after that commit.
//   - process identity: the process group id and leader start time are
//     known only after the start. A small per-job writer commits them once
//     the job has run 50 ms, off the worker's path (a shorter job carries
//     them in its done record); if they never became durable, recovery
//     still finds the job's processes by TT_QUEUE_JOB_ID in their
//     environment.
//
// # Persistence failure
//
// Any failed write (disk full, I/O error) stops dispatch on every card and
// makes Submit return ErrPersistence (503). Running jobs keep running; when
// they end, their done records are held in memory and served from there. A
// retry loop probes the store with backoff; once a probe and the held
// writes succeed, dispatch resumes. A start whose running record failed to
// commit is undone: the job goes back to the head of its queue.
//
// # Restart and stop
//
// New recovers from the store before any worker starts: queued jobs go back
// on their card in FIFO order (a record without a card goes to card 0; a
// job for a card no longer configured fails), running jobs become done with
// exit -1 and "interrupted by service restart", and their leftover process
// groups are killed first. Stop (SIGTERM) refuses new submissions, leaves
// queued jobs queued, and ends running jobs with SIGINT, SIGKILL after the
// grace period, recording exit -1 and "interrupted by service stop".
//
// # Resets and dead cards
//
// A reset is a job of kind reset (see Reset). It goes to the head of its
// card's queue and, unless asked not to, stops the card's running job
// (SIGINT, then SIGTERM and SIGKILL after their graces; the job ends with exit -1,
// outcome interrupted, "interrupted by a reset of card N"). A card has at
// most one pending reset: later requests join it. The reset job runs the
// Controls (reset, health check, and if either fails and a deep reset is
// configured, deep reset and health check again) through the runner, so
// each command has its own process group, timeout and place in the reset
// job's log. Its end, the card record and, when recovery failed, the done
// records of the card's queued jobs (exit -1, "card N is dead") are
// committed in one transaction with the next start.
//
// A dead card refuses submissions (ErrCardDead, 503) and dispatches
// nothing but a reset; the other cards go on. The card record (store
// cards/) keeps it dead across restarts on the same boot; a different
// boot id starts it healthy. Every finished reset advances the card's
// reset epoch, which each job records when it starts, so a reset asked
// for a job is skipped once the card has been reset since that job ran.
// Stop puts a running reset back to queued, and the next start on the
// same boot runs it again (so does a crash: its record still reads
// running).
//
// # Foreign holders
//
// One procscan.Scanner reads the KMD's pids files (Options.DriverPath).
// Status reports, per card, the holders that are not the card's running
// job (see Holder for how they are told apart), from a scan at most
// HolderMaxAge old. With WaitForeign, a worker scans afresh before it
// starts a job and, while a foreign process holds the card, waits
// (re-checking every ForeignRecheck, or when woken) with the reason in
// its status. Resets never wait for foreign holders.
//
// # Estimates and metrics
//
// Positions, waits and run times are estimated from the medians of recent
// finished runs, per command and per card (see estimate.go); the history
// is seeded from the store at start. Submit's answer costs the same at any
// queue depth. Through Options.MeterProvider the scheduler reports per-card
// queue depth, state and running age as gauges read under its lock at each
// collection, job wait and run time histograms by outcome, resets by
// result and persistence failures (see metrics.go); the default provider
// records nothing.
package scheduler
