package legacyimport_test

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/internal/kmdtest"
	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/legacyimport"
	"github.com/ttkit/ttkit/queued/store"
)

// TestImport_RecordBudget: the Python tool had no record budget, queued
// does (api.MaxRecordBytes, a 128 KiB cmd). A row over it is imported but
// never run (a queued one fails at once, saying why, with the sizes and
// the limit), cut to the budget so it costs what any record may; the row
// itself stays whole in the Python database. A variable longer than
// queued takes is dropped and counted, as other variables queued refuses
// are. Rows within the budget come in whole.
func TestImport_RecordBudget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	envOf := func(m map[string]string) string {
		b, _ := json.Marshal(m)
		return string(b)
	}
	big := map[string]string{}
	for i := range 8 {
		big["CHUNK"+strconv.Itoa(i)] = strings.Repeat("e", 64<<10) // 512 KiB in all, each within a variable's limit
	}
	row := func(id, status, cmd, env string) map[string]any {
		r := q(id, "alice")
		r["status"], r["cmd"], r["env_json"] = status, cmd, env
		if status == "done" {
			r["exit_code"], r["started_at"], r["finished_at"] = 0, 2.0, 3.0
		}
		return r
	}
	long := "echo " + strings.Repeat("c", 2<<20)
	kmdtest.MakeLegacyDB(t, map[string]any{"path": filepath.Join(dir, legacyimport.DBName), "rows": []map[string]any{
		row("aaaa0001", "queued", "echo small", envOf(map[string]string{"A": "1"})),
		row("aaaa0002", "queued", long, "{}"),
		row("aaaa0003", "queued", "echo env", envOf(big)),
		row("aaaa0004", "done", long, envOf(big)),
		row("aaaa0005", "queued", "echo var", envOf(map[string]string{"HUGE": strings.Repeat("v", api.MaxEnvVarBytes), "B": "2"})),
	}})
	rep, _, err := legacyimport.ImportOnStart(dir, opts())
	if err != nil {
		t.Fatal(err)
	}
	if rep.OverBudget != 3 || rep.DroppedEnv != 1 {
		t.Errorf("report: over budget %d, dropped env %d; want 3, 1", rep.OverBudget, rep.DroppedEnv)
	}
	st := openStore(t, dir)
	if j := byOld(t, st, "aaaa0001"); j.State != store.StateQueued || j.Cmd != "echo small" || j.Env["A"] != "1" {
		t.Errorf("a row within the budget: %s %q %v", j.State, j.Cmd, j.Env)
	}
	if j := byOld(t, st, "aaaa0005"); j.State != store.StateQueued || j.Env["B"] != "2" || j.Env["HUGE"] != "" {
		t.Errorf("a row with one variable too long: %s, env of %d variables", j.State, len(j.Env))
	}
	for _, old := range []string{"aaaa0002", "aaaa0003", "aaaa0004"} {
		j := byOld(t, st, old)
		if size := len(j.Cmd) + api.EnvBytes(j.Env); size > api.MaxRecordBytes || len(j.Cmd) > api.MaxCmdBytes {
			t.Errorf("%s: a record of %d bytes (cmd %d) kept, over the budget", old, size, len(j.Cmd))
		}
		if j.State != store.StateDone {
			t.Errorf("%s over the budget is %s, want done: it must never run", old, j.State)
		}
		if old == "aaaa0004" {
			if j.Outcome != store.OutcomeSuccess {
				t.Errorf("%s: history keeps its outcome, got %s", old, j.Outcome)
			}
			continue
		}
		if j.Outcome != store.OutcomeFailure || !strings.Contains(j.Error, strconv.Itoa(api.MaxRecordBytes)) || !strings.Contains(j.Error, "bytes") {
			t.Errorf("%s over the budget: %s %q; want a failure naming the sizes and the limit", old, j.Outcome, j.Error)
		}
	}
}
