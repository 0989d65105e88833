package security

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
)

// attack is one raw HTTP request and the refusal it must get.
type attack struct {
	name   string
	method string // default POST
	path   string // default /queue
	// host replaces the Host header; "" keeps the daemon's own.
	host string
	// auth is the Authorization header: "" sends the right token,
	// "-" none, anything else is sent as is.
	auth string
	// contentType for a POST: "" is application/json, "-" none.
	contentType string
	header      []string // more "Name: value" lines
	// body is sent as is; when nil, a valid submission whose fields are
	// replaced by fields (a field set to nil is removed).
	body    []byte
	fields  map[string]any
	chunked bool

	status int
	// want must appear in the JSON error message (case-insensitive).
	want string
	// plain marks an answer that net/http gives before queued's handler
	// sees the request (431 for huge headers, 501 for a transfer coding
	// it does not know, 400 for two Host or Content-Length headers): not
	// JSON, but still nothing done.
	plain bool
}

// TestMalformedRequests sends each attack over its own connection to the
// real daemon and checks the status, that the answer is a JSON error
// naming the problem, and, once all are done, that nothing was enqueued.
func TestMalformedRequests(t *testing.T) {
	tg := startTarget(t)
	attacks := tg.attacks()
	if len(attacks) < 40 {
		t.Fatalf("only %d attacks", len(attacks))
	}
	t.Run("attacks", func(t *testing.T) {
		for _, a := range attacks {
			t.Run(a.name, func(t *testing.T) {
				t.Parallel()
				status, h, body, err := tg.send(a)
				if err != nil {
					t.Fatal(err)
				}
				if status != a.status {
					t.Errorf("status %d, want %d; body %s", status, a.status, cut(body))
				}
				// A refusal never points anywhere: a redirect would invite
				// the client to send the request again elsewhere.
				if loc := h.Get("Location"); loc != "" {
					t.Errorf("answer points to Location %q", loc)
				}
				if a.plain {
					return
				}
				ctype := h.Get("Content-Type")
				if mt, _, _ := mime.ParseMediaType(ctype); mt != "application/json" {
					t.Errorf("Content-Type %q, want application/json; body %s", ctype, cut(body))
					return
				}
				var e struct {
					Error string `json:"error"`
				}
				if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
					t.Errorf("body is not a JSON error: %s", cut(body))
					return
				}
				if !strings.Contains(strings.ToLower(e.Error), strings.ToLower(a.want)) {
					t.Errorf("error %q does not name %q", e.Error, a.want)
				}
			})
		}
	})
	t.Logf("%d malformed or hostile requests refused", len(attacks))
	tg.assertNothingEnqueued(t)
}

func (tg *target) attacks() []attack {
	wrongToken := "Bearer " + strings.Repeat("0", 64)
	realToken := tg.d.Token
	port := tg.host[strings.LastIndexByte(tg.host, ':')+1:]
	otherPort := strconv.Itoa((mustAtoi(port)+1)%65535 + 1)
	jobPath := "/job/" + finishedID
	utf16le := func(s string) []byte {
		u := utf16.Encode([]rune(s))
		b := []byte{0xff, 0xfe}
		for _, r := range u {
			b = append(b, byte(r), byte(r>>8))
		}
		return b
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tg.validBody("gzip", nil))
	zw.Close()
	// also is a valid submission of name's hostile command with extra
	// (raw JSON members) added at its end.
	also := func(name string, fields map[string]any, extra string) []byte {
		b := tg.validBody(name, fields)
		return append(b[:len(b)-1:len(b)-1], ","+extra+"}"...)
	}
	hostile := func(name string) string {
		b, _ := json.Marshal(tg.hostileCmd(name))
		return string(b)
	}
	nested := []byte(`{"cmd":"true","cwd":"/","env":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`)

	as := []attack{
		// Credentials.
		{name: "no token", auth: "-", status: 401, want: "token"},
		{name: "wrong token", auth: wrongToken, status: 401, want: "token"},
		{name: "token without Bearer", auth: realToken, status: 401, want: "token"},
		{name: "basic auth", auth: "Basic dXNlcjpwYXNz", status: 401, want: "token"},
		{name: "half the token", auth: "Bearer " + realToken[:32], status: 401, want: "token"},
		{name: "token twice", auth: "Bearer " + realToken + realToken, status: 401, want: "token"},
		// Host: DNS rebinding and friends.
		{name: "Host evil.example", host: "evil.example", status: 403, want: "Host"},
		{name: "Host evil.example with the daemon port", host: "evil.example:" + port, status: 403, want: "Host"},
		{name: "Host localhost.evil.example", host: "localhost.evil.example:" + port, status: 403, want: "Host"},
		{name: "Host 127.0.0.1.evil.example", host: "127.0.0.1.evil.example:" + port, status: 403, want: "Host"},
		{name: "Host 0.0.0.0", host: "0.0.0.0:" + port, status: 403, want: "Host"},
		{name: "empty Host", host: " ", status: 403, want: "Host"},
		{name: "DNS rebinding page", host: "evil.example:" + port, auth: "-", contentType: "text/plain",
			header: []string{"Origin: http://evil.example:" + port}, status: 403, want: "Host"},
		// Origin and fetch metadata.
		{name: "Origin evil.example", header: []string{"Origin: http://evil.example"}, status: 403, want: "Origin"},
		{name: "Origin null", header: []string{"Origin: null"}, status: 403, want: "Origin"},
		{name: "Origin another loopback port", header: []string{"Origin: http://127.0.0.1:" + otherPort}, status: 403, want: "Origin"},
		{name: "Origin https same host", header: []string{"Origin: https://" + tg.host}, status: 403, want: "Origin"},
		{name: "Sec-Fetch-Site cross-site", header: []string{"Sec-Fetch-Site: cross-site"}, status: 403, want: "cross-site"},
		{name: "Sec-Fetch-Site same-site", header: []string{"Sec-Fetch-Site: same-site"}, status: 403, want: "cross-site"},
		{name: "cross-origin browser POST", auth: "-", contentType: "text/plain;charset=UTF-8",
			header: []string{"Origin: http://evil.example", "Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: no-cors"}, status: 403, want: "Origin"},
		{name: "CORS preflight", method: "OPTIONS", auth: "-", contentType: "-",
			header: []string{"Origin: http://evil.example", "Access-Control-Request-Method: POST"}, status: 403, want: "Origin"},
		// Content types.
		{name: "text/plain", contentType: "text/plain", status: 415, want: "Content-Type"},
		{name: "no content type", contentType: "-", status: 415, want: "Content-Type"},
		{name: "form urlencoded", contentType: "application/x-www-form-urlencoded", status: 415, want: "Content-Type"},
		{name: "multipart form", contentType: "multipart/form-data; boundary=x", status: 415, want: "Content-Type"},
		{name: "json lookalike type", contentType: "application/jsonx", status: 415, want: "Content-Type"},
		{name: "malformed content type", contentType: "application/json; charset", status: 415, want: "Content-Type"},
		// Encodings.
		{name: "UTF-16 body with BOM", body: utf16le(string(tg.validBody("utf16", nil))), status: 400, want: "UTF-8"},
		{name: "UTF-16 charset", contentType: "application/json; charset=utf-16", body: utf16le(string(tg.validBody("utf16cs", nil))), status: 400, want: "UTF-8"},
		{name: "gzip content encoding", header: []string{"Content-Encoding: gzip"}, body: gz.Bytes(), status: 415, want: `"gzip"`},
		// A coded body is refused by its header alone, so each of these
		// sends a plain valid submission that would run if the header were
		// ignored.
		{name: "gzip header on a plain body", header: []string{"Content-Encoding: gzip"}, status: 415, want: `"gzip"`},
		{name: "br content encoding", header: []string{"Content-Encoding: br"}, status: 415, want: `"br"`},
		{name: "deflate content encoding", header: []string{"Content-Encoding: deflate"}, status: 415, want: `"deflate"`},
		{name: "zstd content encoding", header: []string{"Content-Encoding: zstd"}, status: 415, want: `"zstd"`},
		{name: "GZIP in upper case", header: []string{"Content-Encoding: GZIP"}, status: 415, want: `"GZIP"`},
		{name: "identity then gzip", header: []string{"Content-Encoding: identity, gzip"}, status: 415, want: `"gzip"`},
		{name: "two Content-Encoding headers", header: []string{"Content-Encoding: identity", "Content-Encoding: x-made-up"}, status: 415, want: `"x-made-up"`},
		{name: "Content-Encoding on /kill", path: "/kill", header: []string{"Content-Encoding: gzip"}, body: []byte(`{"job_id":"fedcba9876"}`), status: 415, want: "Content-Encoding"},
		{name: "Content-Encoding on /reset", path: "/reset", header: []string{"Content-Encoding: deflate"}, body: []byte(`{}`), status: 415, want: "Content-Encoding"},
		{name: "Content-Encoding on a GET", method: "GET", path: "/status", header: []string{"Content-Encoding: gzip"}, body: []byte{}, status: 415, want: "Content-Encoding"},
		{name: "gzip transfer coding", header: []string{"Transfer-Encoding: gzip"}, body: gz.Bytes(), status: 501, plain: true},
		{name: "coded body behind Expect 100-continue", header: []string{"Expect: 100-continue", "Content-Encoding: gzip"}, body: gz.Bytes(), status: 415, want: `"gzip"`},
		{name: "invalid UTF-8 in cmd", body: []byte("{\"cmd\":\"touch \xff\xfe\",\"cwd\":\"/\"}"), status: 400, want: "UTF-8"},
		{name: "UTF-8 BOM", body: append([]byte("\xef\xbb\xbf"), tg.validBody("bom", nil)...), status: 400, want: "body"},
		{name: "empty body", body: []byte{}, status: 400, want: "body"},
		{name: "JSON array", body: []byte(`[{"cmd":"true","cwd":"/"}]`), status: 400, want: "body"},
		{name: "JSON null", body: []byte(`null`), status: 400, want: "body"},
		{name: "JSON string", body: []byte(`"cmd"`), status: 400, want: "body"},
		{name: "two objects", body: append(tg.validBody("two", nil), tg.validBody("two", nil)...), status: 400, want: "body"},
		{name: "truncated object", body: tg.validBody("truncated", nil)[:20], status: 400, want: "body"},
		{name: "nested 20000 deep", body: nested, status: 400, want: "body"},
		{name: "unknown field", fields: map[string]any{"nice": -5}, status: 400, want: "nice"},
		{name: "field name in upper case", fields: map[string]any{"cmd": nil, "CMD": "true"}, status: 400, want: "CMD"},
		{name: "empty field name", body: also("empty key", nil, `"":1`), status: 400, want: `"": unknown field`},
		{name: "field name with a newline", body: also("newline key", nil, `"a\nINFO forged":1`), status: 400, want: `"a\nINFO forged": unknown field`},
		{name: "field name 8 KiB long", body: also("long key", nil, `"`+strings.Repeat("k", 8<<10)+`":1`), status: 400, want: "unknown field"},
		// Repeated keys: the last one must not silently win.
		{name: "cmd twice, hostile first", body: also("cmd twice 1", nil, `"cmd":"true"`), status: 400, want: "cmd: given more than once"},
		{name: "cmd twice, hostile last", body: also("", map[string]any{"cmd": "true"}, `"cmd":`+hostile("cmd twice 2")), status: 400, want: "cmd: given more than once"},
		{name: "cmd twice, one escaped", body: also("", map[string]any{"cmd": "true"}, `"c\u006dd":`+hostile("cmd escaped")), status: 400, want: "cmd: given more than once"},
		{name: "cwd twice", body: also("cwd twice", nil, `"cwd":"/"`), status: 400, want: "cwd: given more than once"},
		{name: "device_id twice", body: also("device twice", nil, `"device_id":"0"`), status: 400, want: "device_id: given more than once"},
		{name: "env name twice", body: also("env twice", nil, `"env":{"A":"1","B":"2","A":"3"}`), status: 400, want: `env: key "A" given more than once`},
		{name: "env twice", body: also("env object twice", nil, `"env":{"A":"1"},"env":{"B":"2"}`), status: 400, want: "env: given more than once"},
		{name: "kill job_id twice", path: "/kill", body: []byte(`{"job_id":"fedcba9876","job_id":"` + finishedID + `"}`), status: 400, want: "job_id: given more than once"},
		{name: "reset device_id twice", path: "/reset", body: []byte(`{"device_id":"0","device_id":"1"}`), status: 400, want: "device_id: given more than once"},
		{name: "reset unknown field", path: "/reset", body: []byte(`{"device_id":"0","forced":true}`), status: 400, want: "forced"},
		{name: "reset force not a bool", path: "/reset", body: []byte(`{"device_id":"0","force":"yes"}`), status: 400, want: "force"},
		// Types and values.
		{name: "cmd a number", fields: map[string]any{"cmd": 5}, status: 400, want: "cmd"},
		{name: "cmd an array", fields: map[string]any{"cmd": []string{"touch", "x"}}, status: 400, want: "cmd"},
		{name: "cmd missing", fields: map[string]any{"cmd": nil}, status: 400, want: "cmd"},
		{name: "cmd empty", fields: map[string]any{"cmd": ""}, status: 400, want: "cmd"},
		{name: "cmd blank", fields: map[string]any{"cmd": " \t\n"}, status: 400, want: "cmd"},
		{name: "cmd with NUL", fields: map[string]any{"cmd": "true\x00; touch x"}, status: 400, want: "cmd"},
		{name: "cmd 128 KiB", fields: map[string]any{"cmd": strings.Repeat("x", 128<<10)}, status: 400, want: "cmd"},
		{name: "cwd relative", fields: map[string]any{"cwd": "work"}, status: 400, want: "cwd"},
		// cwd may be left out (the Python tt-device-queue's API): the daemon's
		// directory. A mode other than the Python tool's "run" is refused.
		{name: "mode not run", fields: map[string]any{"mode": "reset"}, status: 400, want: "mode"},
		{name: "cwd does not exist", fields: map[string]any{"cwd": tg.work + "/nope"}, status: 400, want: "cwd"},
		{name: "cwd is a file", fields: map[string]any{"cwd": "/etc/hostname"}, status: 400, want: "cwd"},
		{name: "cwd with NUL", fields: map[string]any{"cwd": tg.work + "\x00/x"}, status: 400, want: "cwd"},
		{name: "cwd a number", fields: map[string]any{"cwd": 1}, status: 400, want: "cwd"},
		{name: "device_id unknown card", fields: map[string]any{"device_id": "7"}, status: 400, want: "device_id"},
		{name: "device_id negative", fields: map[string]any{"device_id": "-1"}, status: 400, want: "device_id"},
		{name: "device_id leading zero", fields: map[string]any{"device_id": "01"}, status: 400, want: "device_id"},
		{name: "device_id with space", fields: map[string]any{"device_id": " 1"}, status: 400, want: "device_id"},
		{name: "device_id a path", fields: map[string]any{"device_id": "/dev/tenstorrent/0"}, status: 400, want: "device_id"},
		{name: "device_id boolean", fields: map[string]any{"device_id": true}, status: 400, want: "device_id"},
		{name: "device_id fraction", body: []byte(`{"cmd":"true","cwd":"/","device_id":1.0}`), status: 400, want: "device_id"},
		{name: "device_id exponent", body: []byte(`{"cmd":"true","cwd":"/","device_id":1e0}`), status: 400, want: "device_id"},
		{name: "device_id huge", body: []byte(`{"cmd":"true","cwd":"/","device_id":99999999999999999999}`), status: 400, want: "device_id"},
		{name: "env an array", fields: map[string]any{"env": []string{"A=1"}}, status: 400, want: "env"},
		{name: "env a number value", fields: map[string]any{"env": map[string]any{"A": 1}}, status: 400, want: "env"},
		{name: "env name starts with a digit", fields: map[string]any{"env": map[string]string{"1A": "x"}}, status: 400, want: "env"},
		{name: "env name with =", fields: map[string]any{"env": map[string]string{"A=B": "x"}}, status: 400, want: "env"},
		{name: "env empty name", fields: map[string]any{"env": map[string]string{"": "x"}}, status: 400, want: "env"},
		{name: "env sets TT_QUEUE_JOB_ID", fields: map[string]any{"env": map[string]string{"TT_QUEUE_JOB_ID": "x"}}, status: 400, want: "env"},
		{name: "env sets TT_QUEUE_DEVICE", fields: map[string]any{"env": map[string]string{"TT_QUEUE_DEVICE": "1"}}, status: 400, want: "env"},
		{name: "env value with NUL", fields: map[string]any{"env": map[string]string{"A": "x\x00y"}}, status: 400, want: "env"},
		{name: "timeout negative", fields: map[string]any{"timeout": -1}, status: 400, want: "timeout"},
		{name: "timeout fraction", body: []byte(`{"cmd":"true","cwd":"/","timeout":1.5}`), status: 400, want: "timeout"},
		{name: "timeout exponent", body: []byte(`{"cmd":"true","cwd":"/","timeout":1e2}`), status: 400, want: "timeout"},
		{name: "timeout a string", fields: map[string]any{"timeout": "10"}, status: 400, want: "timeout"},
		{name: "timeout overflows int64", body: []byte(`{"cmd":"true","cwd":"/","timeout":9223372036854775808}`), status: 400, want: "timeout"},
		{name: "timeout above the maximum", fields: map[string]any{"timeout": 86401}, status: 400, want: "timeout"},
		{name: "repeat negative", fields: map[string]any{"repeat": -1}, status: 400, want: "repeat"},
		{name: "repeat above the maximum", fields: map[string]any{"repeat": 10001}, status: 400, want: "repeat"},
		{name: "repeat boolean", fields: map[string]any{"repeat": true}, status: 400, want: "repeat"},
		{name: "client_id 257 bytes", fields: map[string]any{"client_id": strings.Repeat("c", 257)}, status: 400, want: "client_id"},
		{name: "client_id with newline", fields: map[string]any{"client_id": "me\nINFO forged log line"}, status: 400, want: "client_id"},
		{name: "client_id an object", fields: map[string]any{"client_id": map[string]string{}}, status: 400, want: "client_id"},
		// Sizes.
		{name: "body over 1 MiB", body: tg.paddedBody(1<<20 + 1), status: 413, want: "too large"},
		{name: "chunked body over 1 MiB", body: tg.paddedBody(2 << 20), chunked: true, status: 413, want: "too large"},
		// Methods.
		{name: "GET /queue", method: "GET", body: []byte{}, status: 405, want: "POST"},
		{name: "PUT /queue", method: "PUT", status: 405, want: "POST"},
		{name: "DELETE /queue", method: "DELETE", body: []byte{}, status: 405, want: "POST"},
		{name: "POST /status", path: "/status", body: []byte(`{}`), status: 405, want: "GET"},
		{name: "GET /kill", method: "GET", path: "/kill", body: []byte{}, status: 405, want: "POST"},
		{name: "PATCH /job", method: "PATCH", path: jobPath, body: []byte(`{}`), status: 405, want: "GET"},
		// Paths.
		{name: "trailing slash", path: "/queue/", status: 404, want: "no endpoint"},
		{name: "upper-case path", path: "/QUEUE", status: 404, want: "no endpoint"},
		{name: "encoded NUL in path", path: "/queue%00", status: 404, want: "no endpoint"},
		{name: "encoded slash in id", method: "GET", path: "/job/%2e%2e%2fqueue", body: []byte{}, status: 400, want: "job id"},
		{name: "dot-dot id", method: "GET", path: "/job/..%2f..%2fetc%2fpasswd", body: []byte{}, status: 400, want: "job id"},
		{name: "long path", path: "/" + strings.Repeat("a", 32<<10), status: 404, want: "no endpoint"},
		{name: "dot-dot path without token", path: "/../queue", auth: "-", status: 401, want: "token"},
		{name: "dot-dot path from a browser", path: "/x/../queue", header: []string{"Origin: http://evil.example"}, status: 403, want: "Origin"},
		// Paths the ServeMux would redirect to their cleaned form.
		{name: "dot-dot path", path: "/job/../queue", status: 404, want: "no endpoint"},
		{name: "double slash", path: "//queue", status: 404, want: "no endpoint"},
		{name: "dot segment", path: "/./queue", status: 404, want: "no endpoint"},
		{name: "trailing dot segment", path: "/queue/.", status: 404, want: "no endpoint"},
		{name: "trailing dot-dot", path: "/queue/x/..", status: 404, want: "no endpoint"},
		{name: "dot-dot above the root", path: "/../../queue", status: 404, want: "no endpoint"},
		{name: "double slash on /kill", path: "//kill", body: []byte(`{"job_id":"fedcba9876"}`), status: 404, want: "no endpoint"},
		{name: "dot-dot to /reset", path: "/status/../reset", body: []byte(`{}`), status: 404, want: "no endpoint"},
		{name: "trailing slash on /reset", path: "/reset/", body: []byte(`{}`), status: 404, want: "no endpoint"},
		{name: "dot-dot path with a query", path: "/x/../queue?wait=1", status: 404, want: "no endpoint"},
		{name: "empty segment before an id", method: "GET", path: "/job//" + finishedID, body: []byte{}, status: 404, want: "no endpoint"},
		{name: "trailing slash after an id", method: "GET", path: jobPath + "/", body: []byte{}, status: 404, want: "no endpoint"},
		{name: "dot segment after an id", method: "GET", path: "/result/" + finishedID + "/.", body: []byte{}, status: 404, want: "no endpoint"},
		{name: "encoded dot-dot segment", path: "/%2e%2e/queue", status: 404, want: "no endpoint"},
		{name: "root path", path: "/", status: 404, want: "no endpoint"},
		{name: "absolute URI naming another host", path: "http://evil.example/queue", status: 403, want: "Host"},
		{name: "absolute URI with dot-dot", path: "http://" + tg.host + "/x/../queue", status: 404, want: "no endpoint"},
		{name: "OPTIONS *", method: "OPTIONS", path: "*", body: []byte{}, status: 404, want: "no endpoint"},
		{name: "CONNECT", method: "CONNECT", path: tg.host, body: []byte{}, status: 404, want: "no endpoint"},
		{name: "request line over 64 KiB", path: "/" + strings.Repeat("a", 70<<10), status: 431, plain: true},
		{name: "header over 64 KiB", header: []string{"X-Pad: " + strings.Repeat("p", 70<<10)}, status: 431, plain: true},
		{name: "two Host headers", header: []string{"Host: evil.example"}, status: 400, plain: true},
		{name: "two Content-Length headers", header: []string{"Content-Length: 2"}, status: 400, plain: true},
		{name: "long id", method: "GET", path: "/job/" + strings.Repeat("a", 8<<10), body: []byte{}, status: 400, want: "not a job id"},
		// Ids.
		{name: "id too short", method: "GET", path: "/job/abcde", body: []byte{}, status: 400, want: "too short"},
		{name: "id not hex", method: "GET", path: "/job/zzzzzzzz", body: []byte{}, status: 400, want: "not a job id"},
		{name: "id 33 characters", method: "GET", path: "/job/" + finishedID + "0", body: []byte{}, status: 400, want: "not a job id"},
		{name: "id with space", method: "GET", path: "/job/%20abcdef", body: []byte{}, status: 400, want: "not a job id"},
		{name: "id unknown", method: "GET", path: "/job/fedcba9876", body: []byte{}, status: 404, want: "fedcba9876"},
		{name: "id ambiguous", method: "GET", path: "/job/abcdef", body: []byte{}, status: 409, want: "ambiguous"},
		{name: "id ambiguous upper case", method: "GET", path: "/result/ABCDEF0", body: []byte{}, status: 409, want: "ambiguous"},
		{name: "kill id a number", path: "/kill", body: []byte(`{"job_id":123456}`), status: 400, want: "job_id"},
		{name: "kill on an unknown card", path: "/kill", body: []byte(`{"device_id":"9"}`), status: 400, want: "device_id"},
		{name: "kill unknown field", path: "/kill", body: []byte(`{"job_id":"` + finishedID + `","signal":9}`), status: 400, want: "signal"},
		{name: "kill ambiguous", path: "/kill", body: []byte(`{"job_id":"abcdef"}`), status: 409, want: "ambiguous"},
		{name: "kill finished", path: "/kill", body: []byte(`{"job_id":"` + finishedID + `"}`), status: 409, want: "finished"},
		{name: "kill unknown", path: "/kill", body: []byte(`{"job_id":"fedcba9876"}`), status: 404, want: "fedcba9876"},
		// Query parameters.
		{name: "logs negative offset", method: "GET", path: "/logs/" + finishedID + "?offset=-1", body: []byte{}, status: 400, want: "offset"},
		{name: "logs limit above 1 MiB", method: "GET", path: "/logs/" + finishedID + "?limit=2000000", body: []byte{}, status: 400, want: "limit"},
		{name: "logs wait above 60", method: "GET", path: "/logs/" + finishedID + "?wait=61", body: []byte{}, status: 400, want: "wait"},
		{name: "logs wait NaN", method: "GET", path: "/logs/" + finishedID + "?wait=NaN", body: []byte{}, status: 400, want: "wait"},
		{name: "result wait negative", method: "GET", path: "/result/" + finishedID + "?wait=-1", body: []byte{}, status: 400, want: "wait"},
		{name: "result wait Inf", method: "GET", path: "/result/" + finishedID + "?wait=Inf", body: []byte{}, status: 400, want: "wait"},
	}
	for i := range as {
		a := &as[i]
		if a.method == "" {
			a.method = "POST"
		}
		if a.path == "" {
			a.path = "/queue"
		}
		if a.body == nil {
			a.body = tg.validBody(a.name, a.fields)
		}
	}
	return as
}

// validBody is a well-formed submission of the hostile command for name,
// with fields replaced (nil removes one).
func (tg *target) validBody(name string, fields map[string]any) []byte {
	m := map[string]any{"cmd": tg.hostileCmd(name), "cwd": tg.work, "device_id": "1"}
	for k, v := range fields {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// paddedBody is a valid submission of n bytes.
func (tg *target) paddedBody(n int) []byte {
	b := tg.validBody("padded", map[string]any{"client_id": ""})
	pad := n - len(b)
	return append(b[:len(b)-1], []byte(","+strings.Repeat(" ", max(pad-1, 0))+"}")...)[:n:n]
}

// send writes a's request on a fresh connection and reads the answer.
func (tg *target) send(a attack) (int, http.Header, []byte, error) {
	conn, err := net.DialTimeout("tcp", tg.host, 5*time.Second)
	if err != nil {
		return 0, nil, nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	var h bytes.Buffer
	host := tg.host
	if a.host != "" {
		host = strings.TrimSpace(a.host)
	}
	fmt.Fprintf(&h, "%s %s HTTP/1.1\r\nHost: %s\r\n", a.method, a.path, host)
	switch a.auth {
	case "":
		fmt.Fprintf(&h, "Authorization: Bearer %s\r\n", tg.d.Token)
	case "-":
	default:
		fmt.Fprintf(&h, "Authorization: %s\r\n", a.auth)
	}
	switch a.contentType {
	case "":
		h.WriteString("Content-Type: application/json\r\n")
	case "-":
	default:
		fmt.Fprintf(&h, "Content-Type: %s\r\n", a.contentType)
	}
	for _, line := range a.header {
		h.WriteString(line + "\r\n")
	}
	if a.chunked {
		h.WriteString("Transfer-Encoding: chunked\r\n")
	} else {
		fmt.Fprintf(&h, "Content-Length: %d\r\n", len(a.body))
	}
	h.WriteString("Connection: close\r\n\r\n")
	// The body goes out while the answer is read: a refusal may come
	// before the server has read it all. A plain body goes in the same
	// write as the headers, so a small request reaches the server whole
	// and its first read takes all of it: net/http closes at once after
	// some refusals (400 on framing, 501), and a close with request bytes
	// still unread sends a reset that can destroy the answer in flight.
	go func() {
		if !a.chunked {
			conn.Write(append(h.Bytes(), a.body...))
			return
		}
		if _, err := conn.Write(h.Bytes()); err != nil {
			return
		}
		for rest := a.body; len(rest) > 0; {
			n := min(len(rest), 32<<10)
			if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", n, rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
		}
		io.WriteString(conn, "0\r\n\r\n")
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: a.method})
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading the answer: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading the answer's body: %w", err)
	}
	return resp.StatusCode, resp.Header, body, nil
}

func cut(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}
