package legacyimport

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
)

// fingerprint identifies one version of a database: its file and WAL as
// found (identity, size, modification time) and the hash of what was
// read from them. A start compares it with the one recorded at the last
// import to tell a database that changed since.
type fingerprint struct {
	DB     fileID `json:"db"`
	WAL    fileID `json:"wal"`
	SHA256 string `json:"sha256"`
}

// sameFiles reports whether the files look unchanged (identity, size,
// modification time), without reading them.
func (f fingerprint) sameFiles(g fingerprint) bool { return f.DB == g.DB && f.WAL == g.WAL }

// snapshot copies the database and its WAL (when there is one) into the
// private directory into, reading them as their owner (source.openOwned),
// and never writing, locking or creating anything beside the source: its
// -shm, which SQLite would need to read the WAL in place, is neither read
// nor touched; SQLite rebuilds it for the copy. The copy is consistent
// when the files are the same before and after it, which is checked: a
// file that changed meanwhile fails with ErrInUse. The result is the
// path of the copy and the fingerprint of what was read.
func snapshot(s *source, into string) (string, fingerprint, error) {
	dst := filepath.Join(into, DBName)
	h := sha256.New()
	fp := fingerprint{DB: s.db, WAL: s.wal}
	if err := copyOwned(s, s.path, s.db, dst, h); err != nil {
		return "", fp, err
	}
	if s.wal.Exists {
		if err := copyOwned(s, s.path+"-wal", s.wal, dst+"-wal", h); err != nil {
			return "", fp, err
		}
	}
	fp.SHA256 = hex.EncodeToString(h.Sum(nil))
	db, err1 := lstatID(s.path)
	wal, err2 := lstatID(s.path + "-wal")
	if err1 != nil || err2 != nil || db != s.db || wal != s.wal {
		return "", fp, &InUseError{Path: s.path, Evidence: []string{"it changed while it was read"}}
	}
	return dst, fp, nil
}

// copyOwned copies the owner's file src, which must still be the file id
// names, to a new private file dst, adding what it read to h. When root
// imports it for its owner (system mode), a file that users other than
// the owner may write (group or others' write permission) is refused
// (ErrUnsafe): its jobs would run as the owner, written by another.
func copyOwned(s *source, src string, id fileID, dst string, h hash.Hash) error {
	in, fi, err := s.openOwned(src, id)
	if err != nil {
		return fmt.Errorf("reading the Python tt-device-queue's database: %w", err)
	}
	defer in.Close()
	if s.asOwner && fi.Mode().Perm()&0o022 != 0 {
		// Root imports it as the owner's jobs: rows that another user
		// could have written would run as the owner.
		return fmt.Errorf("%s can be written by users other than %s (mode %#o), who could have written jobs into it that would run as %s; chmod go-w it (as %s) and import again: %w",
			src, s.owner.Name, fi.Mode().Perm(), s.owner.Name, s.owner.Name, ErrUnsafe)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	n, err := io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != fi.Size() {
		err = &InUseError{Path: s.path, Evidence: []string{fmt.Sprintf("%s changed size while it was read", filepath.Base(src))}}
	}
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return nil
}
