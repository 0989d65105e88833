package store

// Upgrading a store written by an older queued.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// upgrade brings a store of version 1 to SchemaVersion: it copies the
// file to <path>.v1-<UTC time>.bak (and syncs it), then rewrites every
// record brief with its spec under specs/, and the version, in one
// transaction, so the store is either still version 1 or wholly version 2.
// A new store, or one of any other version, is left to initSchema.
func upgrade(db *bolt.DB, path string) error {
	v := 0
	if err := db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(BucketMeta); meta != nil {
			v, _ = strconv.Atoi(string(meta.Get(KeyVersion)))
		}
		return nil
	}); err != nil {
		return err
	}
	if v != 1 {
		return nil
	}
	backup := fmt.Sprintf("%s.v1-%s.bak", path, time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := backupTo(db, backup); err != nil {
		return fmt.Errorf("backing up the version 1 store to %s before upgrading it to version %d: %w", backup, SchemaVersion, err)
	}
	if err := db.Update(migrateV1); err != nil {
		return fmt.Errorf("upgrading the store from version 1 to %d (nothing changed; a copy is in %s): %w", SchemaVersion, backup, err)
	}
	return nil
}

// backupTo writes a consistent copy of the store to a new file at path
// and syncs it and its directory.
func backupTo(db *bolt.DB, path string) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	if err := db.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(f)
		return err
	}); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// migrateV1 moves every job's spec out of its record into specs/ and
// marks the store version 2.
func migrateV1(tx *bolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(BucketSpecs); err != nil {
		return fmt.Errorf("creating bucket %s: %w", BucketSpecs, err)
	}
	jobs := tx.Bucket(BucketJobs)
	if jobs == nil {
		return errors.New("no jobs bucket: not a queued store")
	}
	// The keys first: a bucket must not change under its cursor.
	var keys [][]byte
	if err := jobs.ForEach(func(k, _ []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		return nil
	}); err != nil {
		return err
	}
	for _, k := range keys {
		var j Job
		if err := decodeJob(jobs.Get(k), &j); err != nil {
			return fmt.Errorf("job at sequence %d: %w", binary.BigEndian.Uint64(k), err)
		}
		spec, err := json.Marshal(j.Spec())
		if err != nil {
			return fmt.Errorf("encoding the spec of job %s: %w", j.ID, err)
		}
		if err := putSpec(tx, j.ID, k, spec, true); err != nil {
			return err
		}
		brief, err := json.Marshal(j.Briefed())
		if err != nil {
			return fmt.Errorf("encoding job %s: %w", j.ID, err)
		}
		if err := jobs.Put(k, brief); err != nil {
			return fmt.Errorf("rewriting job %s: %w", j.ID, err)
		}
	}
	return tx.Bucket(BucketMeta).Put(KeyVersion, []byte(strconv.Itoa(SchemaVersion)))
}
