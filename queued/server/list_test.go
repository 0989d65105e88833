package server

import (
	"net/http"
	"strings"
	"testing"
)

// TestList_RefusesBadFilters names the bad query parameter.
func TestList_RefusesBadFilters(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	for _, tc := range []struct{ query, field string }{
		{"state=finished", "state"},
		{"device_id=-1", "device_id"},
		{"device_id=x", "device_id"},
		{"limit=5000", "limit"},
		{"limit=-2", "limit"},
		{"client_id=" + strings.Repeat("a", 300), "client_id"},
	} {
		code, body := d.raw(http.MethodGet, "/jobs?"+tc.query, "", nil)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.field) {
			t.Errorf("GET /jobs?%s: %d %s; want 400 naming %s", cut(tc.query, 40), code, body, tc.field)
		}
	}
	d.queue("0", "true")
	if code, body := d.raw(http.MethodGet, "/jobs?limit=1", "", nil); code != http.StatusOK || !strings.Contains(body, `"jobs":[{`) {
		t.Fatalf("GET /jobs?limit=1: %d %s", code, body)
	}
}
