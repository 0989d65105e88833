package doctor

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/ttkit/ttkit/internal/devacl"
	"github.com/ttkit/ttkit/queued/account"
	"github.com/ttkit/ttkit/queued/api"
)

// DefaultUdevRule is where make install-system ENFORCE=1 installs the
// rule that makes card nodes root's alone.
const DefaultUdevRule = "/etc/udev/rules.d/60-tenstorrent-queued.rules"

// checkEnforcement reports TT_DEVICE_ENFORCE=acl's state: each card
// node's mode and owner, the udev rule, who holds each card's grant, and
// grants that belong to no running job or hold (st's current jobs; a
// crash leaves them, and queued's next start removes them). It fails
// when enforcement is meant (h.Enforce, or the rule is installed) while
// a node admits others.
func checkEnforcement(h Host, st *api.Status) Check {
	c := Check{Name: "enforcement"}
	_, ruleErr := os.Stat(h.UdevRule)
	rule := ruleErr == nil
	if !h.Enforce && !rule {
		c.Status, c.Detail = OK, "off: cooperative serialization, as the specification has it (TT_DEVICE_ENFORCE=acl fences each card to its running job's user)"
		return c
	}
	cards := h.Cards
	if cards == nil {
		cards, _ = numericEntries(h.DevDir, false)
	}
	owners := map[int]uint32{}
	if st != nil {
		for i, n := range statusCards(*st) {
			if cur := st.Cards[i].Current; cur != nil && cur.OwnerUID != nil {
				owners[n] = *cur.OwnerUID
			}
		}
	}
	e := &devacl.Enforcer{Dir: h.DevDir}
	var lines, open, problems []string
	stray := false
	for _, n := range cards {
		s, err := e.State(n)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if err := e.Check([]int{n}); errors.Is(err, devacl.ErrOpenToOthers) {
			open = append(open, s.Path)
		}
		line := fmt.Sprintf("card %d: %04o %s:%s", n, s.Mode.Perm(), idName(s.UID, account.Name), idName(s.GID, groupName))
		for _, uid := range s.Users {
			if o, ok := owners[n]; ok && o == uid {
				line += ", granted to " + account.Name(uid) + " (its running job's)"
			} else {
				line += ", stray grant to " + account.Name(uid)
				stray = true
			}
		}
		if len(s.Users) == 0 {
			line += ", no grant"
		}
		for _, gid := range s.Groups {
			line += ", standing grant to group " + groupName(gid)
		}
		lines = append(lines, line)
	}
	ruleText := "udev rule " + h.UdevRule
	if !rule {
		ruleText = "no udev rule at " + h.UdevRule
	}
	state := "TT_DEVICE_ENFORCE=acl"
	if !h.Enforce {
		state = "TT_DEVICE_ENFORCE is not acl here (the rule is installed)"
	}
	c.Detail = state + "; " + ruleText + "; " + strings.Join(lines, "; ")
	switch {
	case len(problems) > 0:
		c.Status, c.Fix = Fail, strings.Join(problems, "; ")
	case len(open) > 0:
		c.Status = Fail
		c.Detail = "open to others: " + strings.Join(open, ", ") + "; " + c.Detail
		c.Fix = "sudo make install-system ENFORCE=1, then: sudo udevadm control --reload && sudo udevadm trigger --subsystem-match=tenstorrent --action=change"
	case stray:
		c.Status = Warn
		c.Fix = "a grant that belongs to no running job or hold (left by a crash): restart queued-system while the queue is idle, which removes it before dispatching"
	default:
		c.Status = OK
	}
	return c
}

// idName is root for id 0, else name(id).
func idName(id uint32, name func(uint32) string) string {
	if id == 0 {
		return "root"
	}
	return name(id)
}

// groupName is gid's group name, or "gid N".
func groupName(gid uint32) string {
	if g, err := user.LookupGroupId(strconv.FormatUint(uint64(gid), 10)); err == nil {
		return g.Name
	}
	return fmt.Sprintf("gid %d", gid)
}
