package scheduler

import (
	"fmt"
	"time"

	"github.com/ttkit/ttkit/queued/store"
)

// deadInfo says why and since when a card is dead, and on which boot.
type deadInfo struct {
	reason string
	since  time.Time
	bootID string
}

// resetResult is how a card's last reset ended, kept in its card record.
type resetResult struct {
	id     string
	result string // ResultOK or ResultFailed
	detail string
	at     time.Time
}

// Reset results as status and the card record show them.
const (
	ResultOK     = "ok"     // the health check passed; the card is healthy
	ResultFailed = "failed" // recovery failed; the card is dead
)

// DeadCardError refuses work for a dead card. errors.Is(err, ErrCardDead)
// holds; the message names the card, why it died and how to revive it.
type DeadCardError struct {
	Card   int
	Reason string
	Since  time.Time
}

func (e *DeadCardError) Error() string {
	return fmt.Sprintf("card %d is dead since %s (%s); reset --device %d tries to recover it",
		e.Card, e.Since.UTC().Format(time.RFC3339), e.Reason, e.Card)
}

// Is makes errors.Is(err, ErrCardDead) true.
func (e *DeadCardError) Is(target error) bool { return target == ErrCardDead }

// deadErrLocked is the refusal for a dead card.
func (c *card) deadErrLocked() error {
	return &DeadCardError{Card: c.id, Reason: c.dead.reason, Since: c.dead.since}
}

// changedLocked marks the card record as changed in memory; the next
// commit that carries it makes it durable.
func (c *card) changedLocked() { c.rev++ }

// dirtyLocked reports whether the card record has changes not yet durable.
func (c *card) dirtyLocked() bool { return c.rev != c.savedRev }

// recordLocked is the card's durable record as of now.
func (c *card) recordLocked() store.Card {
	r := store.Card{ID: c.id, State: store.CardHealthy, ResetEpoch: c.resetEpoch,
		LastResetID: c.last.id, LastResetAt: c.last.at, LastResetResult: c.last.result, LastResetDetail: c.last.detail}
	if c.dead != nil {
		r.State, r.DeadReason, r.DeadSince, r.DeadBootID = store.CardDead, c.dead.reason, c.dead.since, c.dead.bootID
	}
	return r
}

// loadCards restores each configured card's reset epoch, last reset and
// dead state from the store. A card that died on another boot (a different
// boot id) starts healthy: a reboot clears it. If the boot id cannot be
// read, a dead card stays dead, the safe side.
func (s restart) loadCards() error {
	recs, err := s.st.Cards()
	if err != nil {
		return fmt.Errorf("reading card records: %w", err)
	}
	for _, r := range recs {
		c := s.cards[r.ID]
		if c == nil {
			continue // a card no longer configured keeps its record
		}
		c.resetEpoch = r.ResetEpoch
		c.last = resetResult{id: r.LastResetID, result: r.LastResetResult, detail: r.LastResetDetail, at: r.LastResetAt}
		if r.State != store.CardDead {
			continue
		}
		if s.bootID != "" && r.DeadBootID != s.bootID {
			s.log.Info("card was dead on an earlier boot; starting it healthy", "card", c.id, "dead_since", r.DeadSince, "reason", r.DeadReason)
			c.changedLocked()
			continue
		}
		c.dead = &deadInfo{reason: r.DeadReason, since: r.DeadSince, bootID: r.DeadBootID}
		c.state = Dead
		s.log.Warn("card is dead; reset --device to try recovery again", "card", c.id, "since", r.DeadSince, "reason", r.DeadReason)
	}
	return nil
}
