package scheduler

import (
	"fmt"
	"log/slog"

	"github.com/ttkit/ttkit/queued/store"
)

// Enforcement (TT_DEVICE_ENFORCE=acl, docs/system-mode.md): the card
// nodes admit no one but root, and while a job or a hold runs its owner
// alone may open its cards. The grant is given before the job's process
// starts (before a hold is shown taken) and taken back when it ends,
// before its cards are free for the next; at start every grant is a
// leftover and is removed before anything is dispatched. The nodes are
// the Fence's; the scheduler only says when.

// Fence gives a user read-write on cards' nodes and takes it back;
// devacl.Enforcer is the one queued uses.
type Fence interface {
	// Grant gives uid cards, all or none, taking away any other user's
	// grant on them.
	Grant(cards []int, uid uint32) error
	// Revoke takes uid's grant off cards.
	Revoke(cards []int, uid uint32) error
	// Reconcile removes every user grant on cards and describes each.
	Reconcile(cards []int) ([]string, error)
}

// fencer is the scheduler's side of the Fence: whom to grant what, and
// when a failure stops a job.
type fencer struct {
	f   Fence // nil: enforcement off
	log *slog.Logger
}

// reconcile removes the grants a crash left on cards, before any worker
// starts; it fails the start when it cannot (a card would stay open to a
// user with no job on it).
func (c fencer) reconcile(cards []int) error {
	if c.f == nil {
		return nil
	}
	stray, err := c.f.Reconcile(cards)
	for _, s := range stray {
		c.log.Warn("enforcement: removed a grant that belongs to no running job or hold (left by a crash)", "grant", s)
	}
	if err != nil {
		return fmt.Errorf("TT_DEVICE_ENFORCE=acl: %w", err)
	}
	return nil
}

// grantee is the user rec's cards are granted to, and whether there is
// one: a job's or a hold's owner; never for a reset, nor for root (who
// needs none) or an owner-less record.
func (c fencer) grantee(rec *store.Job) (uint32, bool) {
	if c.f == nil || rec.Kind == store.KindReset || rec.OwnerUID == nil || *rec.OwnerUID == 0 {
		return 0, false
	}
	return *rec.OwnerUID, true
}

// grant gives j's owner j's cards; an error means the job must not
// start.
func (c fencer) grant(j *job) error {
	uid, ok := c.grantee(&j.rec)
	if !ok {
		return nil
	}
	if err := c.f.Grant(j.rec.Cards(), uid); err != nil {
		return fmt.Errorf("TT_DEVICE_ENFORCE=acl: cannot give the job's user its cards: %w", err)
	}
	return nil
}

// revoke takes j's owner's grant back; a failure is logged, and the next
// grant on the card replaces the leftover in any case.
func (c fencer) revoke(j *job) {
	uid, ok := c.grantee(&j.rec)
	if !ok {
		return
	}
	if err := c.f.Revoke(j.rec.Cards(), uid); err != nil {
		c.log.Error("enforcement: cannot take back a finished job's grant; the next job's grant replaces it", "job", j.rec.ID, "err", err)
	}
}
