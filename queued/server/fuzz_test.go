package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/scheduler"
	"github.com/ttkit/ttkit/queued/store"
)

// fuzzBodyLimit is the body limit the fuzzers decode under: small, so the
// 413 path is reachable.
const fuzzBodyLimit = 4 << 10

var queueFields = []string{"cmd", "cwd", "device_id", "env", "timeout", "repeat", "client_id"}

// fuzzRequest wraps body as the handler sees it: behind MaxBytesReader.
func fuzzRequest(body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/queue", bytes.NewReader(body))
	r.Body = http.MaxBytesReader(nil, r.Body, fuzzBodyLimit)
	return r
}

// checkDecodeError: a refusal is a 413 or a FieldError whose field is one
// the endpoint knows, "body", or a field the body itself named, and whose
// message starts with that field.
func checkDecodeError(t *testing.T, err error, body []byte, known []string) {
	t.Helper()
	if errors.Is(err, errBodyTooLarge) {
		if len(body) <= fuzzBodyLimit {
			t.Fatalf("%d-byte body refused as too large", len(body))
		}
		return
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) names no field", err, err)
	}
	if fe.Msg == "" || !strings.HasPrefix(err.Error(), fieldLabel(fe.Field)+": ") {
		t.Fatalf("malformed field error %q (field %q)", err, fe.Field)
	}
	if fe.Field == "body" || contains(known, fe.Field) {
		return
	}
	// Otherwise it is an unknown field the body has; its name may be
	// empty ({"": 1}), which the message then shows quoted.
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		t.Fatalf("error names field %q of a body that is no JSON object", fe.Field)
	}
	if _, ok := fields[fe.Field]; !ok {
		t.Fatalf("error names field %q, which the body does not have", fe.Field)
	}
}

// FuzzDecodeQueueRequest feeds arbitrary bodies to the POST /queue
// decoder: it must never panic, every refusal must name a field, and an
// accepted body must give a valid spec that survives a round trip
// through api.QueueRequest unchanged.
func FuzzDecodeQueueRequest(f *testing.F) {
	d := start(f, options{})
	work := d.work
	for _, seed := range []string{
		`{"cmd":"true","cwd":"/"}`,
		`{"cmd":"echo hi","cwd":"` + work + `","device_id":"1","env":{"A":"b","_X1":""},"timeout":60,"repeat":3,"client_id":"me"}`,
		`{"cmd":"true","cwd":"/tmp/../tmp/.","device_id":1,"timeout":0,"repeat":0,"env":null,"client_id":null}`,
		`{"cmd":"true","cwd":"/","device_id":"01"}`,
		`{"cmd":"true","cwd":"/","timeout":1e3}`,
		`{"cmd":"true","cwd":"/","timeout":-1}`,
		`{"cmd":"true","cwd":"/","repeat":10001}`,
		`{"cmd":"true","cwd":"/","env":{"TT_QUEUE_JOB_ID":"x"}}`,
		`{"cmd":"true","cwd":"/","env":{"A":1}}`,
		`{"cmd":"true","cwd":"/","nice":1}`,
		`{"cmd":"a","cmd":"b","cwd":"/"}`,
		`{"cmd":"a","c\u006dd":"b","cwd":"/"}`,
		`{"cmd":"true","cwd":"/","env":{"A":"1","A":"2"}}`,
		`{"":1,"cmd":"true","cwd":"/"}`,
		`{"cmd":"true","cwd":"/","timeout":1e400}`,
		`{"cmd":"\u0000","cwd":"/"}`,
		`{"cmd":"true","cwd":"relative"}`,
		`{"cmd":"true","cwd":"/etc/hostname"}`,
		`[]`, `null`, `{}`, `{"cmd":"true","cwd":"/"} {}`, "\xff\xfe{", "\xef\xbb\xbf{}",
		`{"cmd":"true","cwd":"/","device_id":` + strings.Repeat("9", 30) + `}`,
		`{"cmd":"true","cwd":"/","client_id":"a` + "\\n" + `b"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		spec, err := d.srv.submissions.decodeQueue(fuzzRequest(body))
		if err != nil {
			checkDecodeError(t, err, body, queueFields)
			return
		}
		if !utf8.Valid(body) || !json.Valid(body) {
			t.Fatalf("accepted a body that is not valid UTF-8 JSON: %q", body)
		}
		checkSpec(t, spec, d.srv.cfg.MaxTimeout.Seconds())

		again, err := d.srv.submissions.decodeQueue(fuzzRequest(encodeSpec(t, spec)))
		if err != nil {
			t.Fatalf("the re-encoded spec %+v is refused: %v", spec, err)
		}
		if !reflect.DeepEqual(spec, again) {
			t.Fatalf("round trip changed the spec:\n %+v\n %+v", spec, again)
		}
	})
}

// envNamePattern is the rule api.ValidEnvName implements, kept here as an
// independent check of it.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkSpec asserts everything the decoder promises about an accepted job.
func checkSpec(t *testing.T, spec scheduler.JobSpec, maxTimeout float64) {
	t.Helper()
	switch {
	case strings.TrimSpace(spec.Cmd) == "" || len(spec.Cmd) > api.MaxCmdBytes || strings.ContainsRune(spec.Cmd, 0):
		t.Fatalf("accepted cmd %q", spec.Cmd)
	case !filepath.IsAbs(spec.Cwd) || filepath.Clean(spec.Cwd) != spec.Cwd:
		t.Fatalf("accepted cwd %q", spec.Cwd)
	case spec.Card != 0 && spec.Card != 1:
		t.Fatalf("accepted card %d", spec.Card)
	case spec.Timeout < 0 || spec.Timeout.Seconds() > maxTimeout:
		t.Fatalf("accepted timeout %v", spec.Timeout)
	case spec.Repeat < 1 || spec.Repeat > api.MaxRepeat:
		t.Fatalf("accepted repeat %d", spec.Repeat)
	case len(spec.ClientID) > api.MaxClientIDBytes || strings.IndexFunc(spec.ClientID, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		t.Fatalf("accepted client_id %q", spec.ClientID)
	case spec.Env != nil && len(spec.Env) == 0:
		t.Fatalf("accepted an empty env as non-nil")
	}
	for k, v := range spec.Env {
		if !envNamePattern.MatchString(k) || api.ReservedEnv(k) || strings.ContainsRune(v, 0) {
			t.Fatalf("accepted env %q=%q", k, v)
		}
	}
}

// encodeSpec writes spec back as the client would send it.
func encodeSpec(t *testing.T, spec scheduler.JobSpec) []byte {
	t.Helper()
	b, err := json.Marshal(api.QueueRequest{Cmd: spec.Cmd, Cwd: spec.Cwd, DeviceID: strconv.Itoa(spec.Card), Env: spec.Env,
		Timeout: int64(spec.Timeout.Seconds()), Repeat: spec.Repeat, ClientID: spec.ClientID})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > fuzzBodyLimit {
		t.Skip("the re-encoded spec is over the fuzz body limit") // escaping can grow it
	}
	return b
}

// FuzzDecodeResetRequest feeds arbitrary bodies to the POST /reset
// decoder: no panic; a refusal names a field or is an unknown or
// ambiguous job; an accepted request names at most one target.
func FuzzDecodeResetRequest(f *testing.F) {
	d := start(f, options{})
	for _, seed := range []string{
		`{}`, `{"device_id":"1"}`, `{"device_id":0,"no_interrupt":true}`, `{"job_id":"abcdef"}`,
		`{"job_id":"abcdef","device_id":"0"}`, `{"device_id":"7"}`, `{"no_interrupt":"yes"}`, `{"job_id":5}`, `[]`,
		``, " \r\n\t", "\u0085", `{"force":1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := d.srv.resets.decodeReset(fuzzRequest(body))
		if err != nil {
			if errors.Is(err, scheduler.ErrNotFound) || errors.Is(err, scheduler.ErrAmbiguous) {
				return
			}
			checkDecodeError(t, err, body, []string{"device_id", "job_id", "no_interrupt", "force", "client_id"})
			return
		}
		// An empty body is {} (the Python tool posts none): every card.
		if isBlank(body) {
			if req.Card != nil || req.JobID != "" || req.NoInterrupt || req.Force {
				t.Fatalf("empty body %q read as %+v", body, req)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted a body that is not JSON: %q", body)
		}
		if req.Card != nil && req.JobID != "" {
			t.Fatalf("accepted both a card and a job: %+v", req)
		}
		if req.Card != nil && *req.Card != 0 && *req.Card != 1 {
			t.Fatalf("accepted card %d", *req.Card)
		}
	})
}

// FuzzDecodeID: an accepted id or prefix is the lower-cased input, 6 to
// 32 hex characters; a refusal names the field.
func FuzzDecodeID(f *testing.F) {
	for _, seed := range []string{"", "abc", "abcdef", "ABCDEF12", strings.Repeat("a", 32), strings.Repeat("a", 33), "zzzzzz", "../../etc", "abcdef\x00"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		id, err := decodeID("job id", raw)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "job id" {
				t.Fatalf("refusal %v does not name the field", err)
			}
			return
		}
		if id != strings.ToLower(raw) || len(id) < api.MinIDPrefix || len(id) > store.IDLen || !store.IsHex(id) {
			t.Fatalf("accepted %q as %q", raw, id)
		}
	})
}
