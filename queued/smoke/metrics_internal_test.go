package smoke

import "testing"

// The exposition parser reads what the Prometheus exporter writes:
// escaped quotes, backslashes and newlines in label values, samples
// without labels, comments, and lines it must skip rather than misread.
func TestParseExposition(t *testing.T) {
	text := "# HELP tt_process x\n# TYPE tt_process gauge\n" +
		`tt_process{command_line="python3 -c \"print(1)\" a\\b\nc",friendly_name="python -c",hostname="h",pid="42"} 1` + "\n" +
		"tt_process_count{hostname=\"h\"} 3\n" +
		"up 1\n" +
		"broken{pid=\"7} 1\n"
	got := parseExposition(text)
	if len(got) != 3 {
		t.Fatalf("got %d samples, want 3: %+v", len(got), got)
	}
	if got[0].name != "tt_process" || got[0].labels["pid"] != "42" || got[0].labels["command_line"] != "python3 -c \"print(1)\" a\\b\nc" {
		t.Errorf("tt_process sample = %+v", got[0])
	}
	if got[1].name != "tt_process_count" || got[1].labels["hostname"] != "h" || got[2].name != "up" || len(got[2].labels) != 0 {
		t.Errorf("other samples = %+v", got[1:])
	}
	if countProcess(got) != 1 {
		t.Errorf("countProcess = %d, want 1", countProcess(got))
	}
}
