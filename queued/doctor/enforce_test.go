package doctor_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/devacl"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/doctor"
)

// doctor's enforcement check (issue 44) reports the node modes, the udev
// rule, which user holds which card's grant, and grants that belong to no
// running job or hold.
func TestEnforcement(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		_, h := healthy(t)
		c := byName(t, doctor.Run(context.Background(), h), "enforcement")
		if c.Status != doctor.OK || !strings.Contains(c.Detail, "off") || !strings.Contains(c.Detail, "cooperative") {
			t.Fatalf("%+v", c)
		}
	})
	t.Run("on, nodes open to all", func(t *testing.T) {
		r, h := healthy(t)
		h.Enforce = true
		c := byName(t, doctor.Run(context.Background(), h), "enforcement")
		node := r.Path("/dev/tenstorrent/0")
		if c.Status != doctor.Fail || !strings.Contains(c.Detail, node) || !strings.Contains(c.Detail, "no udev rule") ||
			!strings.Contains(c.Fix, "ENFORCE=1") {
			t.Fatalf("%+v", c)
		}
	})
	t.Run("on, a job's grant and a stray one", func(t *testing.T) {
		r, h := healthy(t)
		h.Enforce = true
		r.Write("/etc/udev/rules.d/60-tenstorrent-queued.rules", "SUBSYSTEM==\"tenstorrent\", MODE:=\"0600\"\n", 0o644)
		h.UdevRule = r.Path("/etc/udev/rules.d/60-tenstorrent-queued.rules")
		e := &devacl.Enforcer{Dir: h.DevDir}
		for _, n := range []int{0, 1} {
			os.Chmod(e.Node(n), 0o600)
		}
		alice, mallory := uint32(4242), uint32(4343)
		if err := e.Grant([]int{0}, alice); err != nil {
			t.Fatal(err)
		}
		if err := e.Grant([]int{1}, mallory); err != nil {
			t.Fatal(err)
		}
		queued := h.Queued
		h.Queued = func(ctx context.Context) (api.Status, error) {
			s, err := queued(ctx)
			s.Mode = api.SystemMode
			s.Cards[0].Current = &api.JobSummary{ID: "job", Kind: "job", OwnerUID: &alice, Owner: "alice"}
			return s, err
		}
		c := byName(t, doctor.Run(context.Background(), h), "enforcement")
		if c.Status != doctor.Warn || !strings.Contains(c.Detail, "card 0: 0600 root:root, granted to uid 4242 (its running job's)") ||
			!strings.Contains(c.Detail, "card 1: 0600 root:root, stray grant to uid 4343") || !strings.Contains(c.Detail, "udev rule "+h.UdevRule) {
			t.Fatalf("%+v", c)
		}
	})
}
