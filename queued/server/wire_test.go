package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/runner"
	"github.com/ttkit/ttkit/queued/scheduler"
)

// wireNames is what the client sends for a request type: the JSON names of
// its fields, in the order it declares them, read here from the type
// itself and independently of the server's own derivation.
func wireNames(t *testing.T, v any) []string {
	t.Helper()
	rt := reflect.TypeOf(v)
	var names []string
	for f := range rt.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || f.Anonymous {
			t.Fatalf("%s.%s has no plain JSON name: the request types are flat and every field is on the wire", rt.Name(), f.Name)
		}
		names = append(names, name)
	}
	return names
}

// filled is v with every field set, so that its JSON carries every key the
// client can send.
func filled(t *testing.T, v any) any {
	t.Helper()
	e := reflect.New(reflect.TypeOf(v)).Elem()
	for i := range e.NumField() {
		f := e.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Int, reflect.Int64:
			f.SetInt(1)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]string{"A": "x"}))
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"A"}))
		default:
			t.Fatalf("%s: no value for a %s field", e.Type().Field(i).Name, f.Kind())
		}
	}
	return e.Interface()
}

// wrongValue is a JSON value of the wrong type for a field of kind k.
func wrongValue(k reflect.Kind) string {
	switch k {
	case reflect.Slice:
		return `{}`
	case reflect.Int, reflect.Int64, reflect.Bool:
		return `"x"`
	}
	return `[]`
}

// TestWire_ServerDecodesEveryFieldTheClientSends: for every request body,
// the fields the server knows are the fields of the api type the client
// encodes, in its order (an unknown field's refusal lists them), and the
// server reads each of them (a value of the wrong type is refused naming
// that field). A field added to a request type and forgotten by the
// server fails here.
func TestWire_ServerDecodesEveryFieldTheClientSends(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	done := d.queue("0", "true").JobID
	d.result(done)
	for _, tc := range []struct {
		path string
		typ  any
		base map[string]string // valid fields the request needs, so the wrong one is the one refused
	}{
		{"/queue", api.QueueRequest{}, map[string]string{"cmd": `"true"`, "cwd": fmt.Sprintf("%q", d.work)}},
		{"/kill", api.KillRequest{}, nil},
		{"/resubmit", api.ResubmitRequest{}, map[string]string{"job_id": fmt.Sprintf("%q", done)}},
		{"/reset", api.ResetRequest{}, nil},
		{"/hold", api.HoldRequest{}, map[string]string{"device_id": `"1"`}},
		{"/release", api.ReleaseRequest{}, nil},
	} {
		names := wireNames(t, tc.typ)
		b, err := json.Marshal(filled(t, tc.typ))
		if err != nil {
			t.Fatal(err)
		}
		var sent map[string]json.RawMessage
		if err := json.Unmarshal(b, &sent); err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 0, len(sent))
		for k := range sent {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if want := slices.Sorted(slices.Values(names)); !slices.Equal(keys, want) {
			t.Errorf("%s: the client encodes %v, its type declares %v", tc.path, keys, want)
		}

		code, out := d.raw(http.MethodPost, tc.path, `{"not_a_field":1}`, nil)
		want := "not_a_field: unknown field (known: " + strings.Join(names, ", ") + ")"
		if code != http.StatusBadRequest || errorOf(t, out) != want {
			t.Errorf("%s: an unknown field: %d %s, want 400 %q", tc.path, code, out, want)
		}

		rt := reflect.TypeOf(tc.typ)
		for i, name := range names {
			fields := []string{}
			for k, v := range tc.base {
				if k != name {
					fields = append(fields, fmt.Sprintf("%q:%s", k, v))
				}
			}
			fields = append(fields, fmt.Sprintf("%q:%s", name, wrongValue(rt.Field(i).Type.Kind())))
			body := "{" + strings.Join(fields, ",") + "}"
			code, out := d.raw(http.MethodPost, tc.path, body, nil)
			msg := errorOf(t, out)
			if code != http.StatusBadRequest || !strings.HasPrefix(msg, name+": ") || strings.Contains(msg, "unknown field") {
				t.Errorf("%s %s: %d %q, want 400 naming %s: the server does not read a field its type has", tc.path, body, code, msg, name)
			}
		}
	}
}

func errorOf(t *testing.T, body string) string {
	t.Helper()
	var e api.ErrorResponse
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not an error answer: %s", body)
	}
	return e.Error
}

// TestWire_ReservedEnvIsWhatTheQueueSets: the variables api reserves are
// exactly those the runner and the scheduler put in every job, and the
// server refuses each in a request's env.
func TestWire_ReservedEnvIsWhatTheQueueSets(t *testing.T) {
	t.Parallel()
	d := start(t, options{})
	for _, name := range []string{runner.JobEnvVar, scheduler.DeviceEnvVar} {
		if !api.ReservedEnv(name) {
			t.Errorf("the queue sets %s in every job, and api does not reserve it", name)
		}
		body := fmt.Sprintf(`{"cmd":"true","cwd":%q,"env":{%q:"x"}}`, d.work, name)
		code, out := d.raw(http.MethodPost, "/queue", body, nil)
		if want := "env: " + name + " is set by the queue"; code != http.StatusBadRequest || errorOf(t, out) != want {
			t.Errorf("env %s: %d %s, want 400 %q", name, code, out, want)
		}
	}
	for _, name := range []string{"TT_QUEUE_OTHER", "TT_VISIBLE_DEVICES", "PATH"} {
		if api.ReservedEnv(name) {
			t.Errorf("api reserves %s, which the queue does not set", name)
		}
	}
}

// TestWire_ModeIsDecidedOnce: the server takes its mode as api.Mode, user
// mode when none is given, and refuses one it does not know rather than
// serve in a mode nobody chose.
func TestWire_ModeIsDecidedOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode api.Mode
		want string
	}{{"", "user"}, {api.UserMode, "user"}, {api.SystemMode, "system"}} {
		d := start(t, options{api: func(c *Config) { c.Mode = tc.mode }})
		m := d.object(http.MethodGet, "/status", "", http.StatusOK)
		if m["mode"] != tc.want {
			t.Errorf("Mode %q: GET /status says mode %v, want %q", tc.mode, m["mode"], tc.want)
		}
	}
	d := start(t, options{})
	cfg := Config{Scheduler: d.sched, Token: d.token, Mode: "shared"}
	if _, err := NewServer(cfg); err == nil || !strings.Contains(err.Error(), `"shared"`) {
		t.Errorf("NewServer with mode %q = %v, want a refusal naming it", cfg.Mode, err)
	}
}
