package server

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
)

// POST /hold takes expires_sec from 0 (never) to api.MaxSeconds, and
// refuses anything else with a 400 naming the value.
func TestHold_ExpiresBounds(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	for _, tc := range []struct {
		expires int64
		code    int
	}{
		{-1, http.StatusBadRequest},
		{api.MaxSeconds + 1, http.StatusBadRequest},
		{api.MaxSeconds, http.StatusCreated},
	} {
		v := strconv.FormatInt(tc.expires, 10)
		code, body := d.raw(http.MethodPost, "/hold", `{"device_id":"1","expires_sec":`+v+`}`, nil)
		if code != tc.code || (code == http.StatusBadRequest && (!strings.Contains(body, "expires_sec") || !strings.Contains(body, v))) {
			t.Errorf("expires_sec %s: %d %s, want %d", v, code, body, tc.code)
		}
	}
}
