package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"
	"unsafe"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// A job's spec is what it runs: its whole command, its environment and
// which of its variables came from the submitter's shell. Together they
// may be a few hundred KiB (the API's record budget), while everything
// else a record holds is a few hundred bytes. So the store keeps them
// apart: jobs/ holds each record brief (the command cut to PreviewBytes,
// with its length and digest, and the environment's size), specs/ holds
// each job's spec, written once with the job's first record and read only
// for that one job (Job: GET /job, a resubmit; Spec: a job's start). Listing,
// recovering the queues at start, seeding the estimates and keeping the
// queued jobs in memory all work on brief records, so what they cost
// does not grow with the size of anybody's command.

// PreviewBytes bounds the command a brief record keeps: enough to tell
// jobs apart in a list; the whole command is one GET /job away.
const PreviewBytes = 256

// BucketSpecs maps a job's sequence number to its spec: a spec of at most
// flatSpecBytes as the value itself, a larger one in a bucket of its own
// under KeySpec, so that writing or deleting a large spec never rewrites
// (and so never reads) a page of another: bbolt keeps at least two values
// in a leaf and copies every value of a leaf it rewrites, so large specs
// side by side would be copied again with each new one. A bucket of its
// own costs a little more to write, which the small specs most jobs have
// (a command and a shell's toolchain variables) do not pay.
var BucketSpecs = []byte("specs")

// flatSpecBytes is the largest spec stored as a plain value of specs/.
const flatSpecBytes = 16 << 10

// KeySpec is the key of the spec in a job's bucket under specs/.
var KeySpec = []byte("spec")

// Spec is a job's whole command and environment, as stored under specs/.
type Spec struct {
	Cmd          string            `json:"cmd"`
	Env          map[string]string `json:"env,omitempty"`
	EnvFromShell []string          `json:"env_from_shell,omitempty"`
}

// EnvSize is the size of an environment as exec passes it: NAME=VALUE
// and a NUL terminator each (api.EnvBytes counts the same way).
func EnvSize(env map[string]string) int {
	n := 0
	for k, v := range env {
		n += len(k) + 1 + len(v) + 1
	}
	return n
}

// Briefed returns j as the store keeps it in jobs/: its command cut to
// PreviewBytes (CmdBytes and CmdSHA256 then say what the whole was), its
// environment left out (EnvVars and EnvBytes say how large it is), and
// Brief set. A brief record stays brief.
func (j Job) Briefed() Job {
	if j.Brief {
		return j
	}
	if len(j.Cmd) > PreviewBytes {
		sum := sha256.Sum256([]byte(j.Cmd))
		j.CmdBytes, j.CmdSHA256 = len(j.Cmd), hex.EncodeToString(sum[:])
		// A copy: a substring would keep the whole command alive.
		j.Cmd = strings.Clone(Preview(j.Cmd))
	} else {
		j.CmdBytes, j.CmdSHA256 = 0, ""
	}
	j.EnvVars, j.EnvBytes = len(j.Env), EnvSize(j.Env)
	j.Env, j.EnvFromShell, j.Brief = nil, nil, true
	return j
}

// Spec is j's spec; j must not be brief.
func (j *Job) Spec() Spec { return Spec{Cmd: j.Cmd, Env: j.Env, EnvFromShell: j.EnvFromShell} }

// WithSpec returns brief record j made whole with its spec.
func (j Job) WithSpec(sp Spec) Job {
	j.Cmd, j.Env, j.EnvFromShell = sp.Cmd, sp.Env, sp.EnvFromShell
	j.CmdBytes, j.CmdSHA256, j.Brief = 0, "", false
	return j
}

// CmdTruncated reports whether Cmd is a preview of a longer command.
func (j *Job) CmdTruncated() bool { return j.Brief && j.CmdBytes > len(j.Cmd) }

// CmdDigest is the SHA-256 of the job's whole command, from a brief
// record as from a whole one: the estimates tell commands apart by it.
func (j *Job) CmdDigest() [sha256.Size]byte {
	var d [sha256.Size]byte
	if j.CmdSHA256 != "" {
		if b, err := hex.DecodeString(j.CmdSHA256); err == nil && len(b) == sha256.Size {
			copy(d[:], b)
			return d
		}
	}
	return sha256.Sum256([]byte(j.Cmd))
}

// Preview is cmd as a brief record keeps it: its first PreviewBytes, not
// cut inside a UTF-8 sequence. Records too large to keep whole (an
// import's over the record budget) keep the same.
func Preview(cmd string) string { return cutUTF8(cmd, PreviewBytes) }

// cutUTF8 cuts s to at most n bytes, not inside a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// putSpec stores the spec of the job at seq, unless it has one already:
// a spec is written once, with the job's first record (isNew: the job has
// no record yet, so no spec either).
func putSpec(tx *bolt.Tx, id string, seq []byte, spec []byte, isNew bool) error {
	specs := tx.Bucket(BucketSpecs)
	if !isNew {
		if k, _ := specs.Cursor().Seek(seq); bytes.Equal(k, seq) {
			return nil
		}
	}
	if len(spec) <= flatSpecBytes {
		if err := specs.Put(seq, spec); err != nil {
			return fmt.Errorf("storing the spec of job %s: %w", id, err)
		}
		return nil
	}
	b, err := specs.CreateBucket(seq)
	if err != nil {
		return fmt.Errorf("storing the spec of job %s: %w", id, err)
	}
	if err := b.Put(KeySpec, spec); err != nil {
		return fmt.Errorf("storing the spec of job %s: %w", id, err)
	}
	return nil
}

// readSpec reads the spec of the job at seq; ok is false when it has none
// (a record written before specs were kept apart carries its own).
func readSpec(tx *bolt.Tx, seq []byte) (sp Spec, ok bool, err error) {
	specs := tx.Bucket(BucketSpecs)
	v := specs.Get(seq) // nil for a bucket
	if b := specs.Bucket(seq); v == nil && b != nil {
		v = b.Get(KeySpec)
	}
	if v == nil {
		return sp, false, nil
	}
	err = json.Unmarshal(v, &sp) // copies out of the mmap
	dropPages(v)
	if err != nil {
		return sp, false, fmt.Errorf("decoding spec: %w", err)
	}
	return sp, true, nil
}

// deleteSpec removes the spec of the job at seq, if it has one. Its pages
// are freed without being read.
func deleteSpec(tx *bolt.Tx, seq []byte) error {
	specs := tx.Bucket(BucketSpecs)
	if specs.Bucket(seq) != nil {
		return specs.DeleteBucket(seq)
	}
	return specs.Delete(seq)
}

var pageSize = os.Getpagesize()

// dropPages tells the kernel this process is done with the whole memory
// pages under v, a value read from bbolt's memory map, once it has been
// copied out. The map is the file's, shared and read-only, so the pages
// stay in the page cache (a later read maps them again) but no longer
// count in queued's resident memory: a spec of 256 KiB read to start one
// job would otherwise stay resident as long as the map, and the next job's
// another, until the map held every spec ever read.
func dropPages(v []byte) {
	if len(v) < pageSize {
		return
	}
	addr := uintptr(unsafe.Pointer(&v[0]))
	start := int((uintptr(pageSize) - addr%uintptr(pageSize)) % uintptr(pageSize))
	end := start + (len(v)-start)/pageSize*pageSize
	if end > start {
		_ = unix.Madvise(v[start:end], unix.MADV_DONTNEED) // advice only: on failure the pages just stay
	}
}

// Release tells the kernel this process is done, for now, with every page
// of bbolt's memory map it has touched (madvise MADV_DONTNEED over the
// whole file): the map is shared and read-only, so the pages stay in the
// page cache and are mapped again as they are next read, but they no
// longer count in queued's resident memory. Records read at start (the
// queues), by lists and by long-polls would otherwise stay resident as
// long as the map, however long ago they were read. The daemon calls it
// when it comes to rest. It holds a read transaction, during which the
// map cannot move.
func (s *Store) Release() error {
	return s.db.View(func(tx *bolt.Tx) error {
		base, size := s.db.Info().Data, uintptr(tx.Size())
		if base == 0 || size == 0 {
			return nil
		}
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, base, size, unix.MADV_DONTNEED); e != 0 {
			return fmt.Errorf("releasing the store's pages: %w", e)
		}
		return nil
	})
}
