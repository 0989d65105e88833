package cli_test

import (
	"path/filepath"
	"testing"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/api"
)

// status names each card's board as sysfs gives it (a T3000's n300s):
// type, serial, ASIC id and PCI address, in the text and in --json.
func TestStatus_NamesEachCardsBoard(t *testing.T) {
	t.Parallel()
	sysfs := filepath.Join(kmdtest.Testdata(t), "sysfs", "t3000", "sys")
	d := startDaemon(t, "TT_DEVICE_SYSFS_PATH="+sysfs)
	d.run("status").want(t, 0, []string{"card 1: n300 100014511e04d0a1 (ASIC 3a1f0c0e00001111) at PCI 0000:05:00.0"}, nil)
	var st api.Status
	decode(t, d.run("--json", "status"), &st)
	if c := st.Cards[1]; c.CardType != "n300" || c.Serial != "100014511e04d0a1" || c.ASICID != "3a1f0c0e00001111" || c.PCIAddress != "0000:05:00.0" {
		t.Errorf("card 1 in status --json: %+v", c)
	}
}
