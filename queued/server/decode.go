package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/store"
)

// FieldError is a request field with an unusable value; the answer is 400
// and the message starts with the field's name.
type FieldError struct {
	Field, Msg string
}

func (e *FieldError) Error() string { return fieldLabel(e.Field) + ": " + e.Msg }

// fieldLabel is a field's name as messages show it: bare when it is a
// plain name such as cmd or "job id", otherwise quoted and cut, so an
// empty key reads `"": unknown field` and a key holding a newline cannot
// forge a line wherever the message is printed.
func fieldLabel(name string) string {
	plain := name != "" && len(name) <= 64 && name[0] != ' ' && name[len(name)-1] != ' '
	for i := 0; plain && i < len(name); i++ {
		c := name[i]
		plain = c == '_' || c == ' ' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	if plain {
		return name
	}
	return strconv.Quote(cut(name, 64))
}

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// errBodyTooLarge marks a body over the limit (413).
var errBodyTooLarge = errors.New("request body too large")

// The fields each request body may have: the JSON names of the fields of
// its type in package api, which the client encodes, in the order the
// type declares them (the order an unknown field's refusal lists them
// in). They are read from the types, so the client and the server cannot
// disagree on a field's name and a field added to a type is known here
// at once; TestWire_ServerDecodesEveryFieldTheClientSends checks that the
// decoders below read every one of them.
var (
	queueRequestFields    = wireFields[api.QueueRequest]()
	killRequestFields     = wireFields[api.KillRequest]()
	resubmitRequestFields = wireFields[api.ResubmitRequest]()
	resetRequestFields    = wireFields[api.ResetRequest]()
)

// wireFields lists the JSON names of the fields of T, a request type of
// package api, as encoding/json names them. The request types are flat:
// an embedded struct there is a mistake, which stops the daemon at once.
func wireFields[T any]() []string {
	t := reflect.TypeFor[T]()
	names := make([]string, 0, t.NumField())
	for f := range t.Fields() {
		if f.Anonymous {
			panic(fmt.Sprintf("server: api.%s embeds %s: a request type's fields are its own", t.Name(), f.Name))
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported(), name == "-":
			continue
		case name == "":
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// readObject reads a JSON object body into its raw fields. Decoding field
// by field (rather than into a struct) lets every error name its field.
func readObject(r *http.Request, known []string) (map[string]json.RawMessage, error) {
	return readBodyObject(r, false, known)
}

// readOptionalObject is readObject for a body that may be empty, which
// counts as {}: the Python tt-device-queue's POST /kill and POST /reset
// take no body at all.
func readOptionalObject(r *http.Request, known []string) (map[string]json.RawMessage, error) {
	return readBodyObject(r, true, known)
}

// readBody is readOptionalObject with a deadline, so a client that stops
// sending frees its handler.
func readBody(w http.ResponseWriter, r *http.Request, known []string) (map[string]json.RawMessage, error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	defer rc.SetReadDeadline(time.Time{})
	return readOptionalObject(r, known)
}

// isBlank reports whether body holds nothing but JSON whitespace (space,
// tab, CR, LF): an empty optional body. Other Unicode spaces (U+0085,
// U+00A0) are not JSON whitespace, so a body of them is refused as not
// JSON rather than read as {}.
func isBlank(body []byte) bool {
	return len(bytes.Trim(body, " \t\r\n")) == 0
}

func readBodyObject(r *http.Request, emptyOK bool, known []string) (map[string]json.RawMessage, error) {
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fmt.Errorf("%w: the limit is %d bytes (TT_DEVICE_MAX_REQUEST_BYTES)", errBodyTooLarge, tooBig.Limit)
	}
	if err != nil {
		return nil, fieldErr("body", "reading: %v", err)
	}
	if !utf8.Valid(body) {
		return nil, fieldErr("body", "not valid UTF-8")
	}
	if emptyOK && isBlank(body) {
		return map[string]json.RawMessage{}, nil
	}
	return decodeObject(body, known)
}

// decodeObject splits one JSON object into its raw fields, refusing a
// field not in known and a key given twice in any object, at the top or
// nested (env). It walks the keys itself because unmarshalling into a map
// lets the last of two equal keys win silently, so {"cmd":"ls","cmd":"rm"}
// would run whichever a reader of the body did not expect. Keys are
// compared after unescaping: "c\u006dd" is cmd. A body that is not one
// JSON object is refused before any field is judged: json.Valid judges it
// first, and the walk (see scanner) then only finds the tokens.
func decodeObject(body []byte, known []string) (map[string]json.RawMessage, error) {
	if !json.Valid(body) {
		return nil, invalidBody(body)
	}
	s := &scanner{b: body}
	if s.peek() != '{' {
		return nil, fieldErr("body", "want one JSON object")
	}
	s.i++
	fields := make(map[string]json.RawMessage, len(known))
	for first := true; s.more(first); first = false {
		k := s.key()
		raw := s.value()
		name, ok := knownName(known, k)
		if !ok {
			return nil, fieldErr(string(k), "unknown field (known: %s)", strings.Join(known, ", "))
		}
		if _, twice := fields[name]; twice {
			return nil, fieldErr(name, "given more than once")
		}
		if key, twice := scanRepeatedKey(raw); twice {
			return nil, fieldErr(name, "key %s given more than once", strconv.Quote(cut(key, 64)))
		}
		fields[name] = raw
	}
	return fields, nil
}

// invalidBody words the refusal of a body json.Valid refused: one JSON
// object followed by anything is "unexpected data", everything else is
// not one JSON object.
func invalidBody(body []byte) error {
	var first json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&first); err == nil && len(first) > 0 && first[0] == '{' {
		return fieldErr("body", "unexpected data after the JSON object")
	}
	return fieldErr("body", "want one JSON object")
}

// knownName returns the entry of known equal to k, so a field's name is
// not allocated for every request.
func knownName(known []string, k []byte) (string, bool) {
	for _, v := range known {
		if v == string(k) {
			return v, true
		}
	}
	return "", false
}

// jsonType names the JSON type of a raw value for error messages.
func jsonType(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func stringField(fields map[string]json.RawMessage, name string) (string, bool, error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return "", false, nil
	}
	s, err := stringValue(raw)
	if err != nil {
		return "", false, fieldErr(name, "want a string, got %s", jsonType(raw))
	}
	return s, true, nil
}

// intField reads a JSON integer; fractions, exponents and strings are
// refused rather than rounded or converted.
func intField(fields map[string]json.RawMessage, name string) (int64, bool, error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil {
		if jsonType(raw) == "a number" {
			return 0, false, fieldErr(name, "want a whole number, got %s", bytes.TrimSpace(raw))
		}
		return 0, false, fieldErr(name, "want a whole number, got %s", jsonType(raw))
	}
	return n, true, nil
}

// queryInt reads a non-negative integer query parameter.
func queryInt(r *http.Request, name string, def, max int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fieldErr(name, "%q is not a non-negative whole number", cut(v, 40))
	}
	if n > max {
		return 0, fieldErr(name, "%d is above the maximum %d", n, max)
	}
	return n, nil
}

// queryBool reads a yes-or-no query parameter: 1 or true, 0 or false,
// absent (false).
func queryBool(r *http.Request, name string) (bool, error) {
	switch v := r.URL.Query().Get(name); v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, fieldErr(name, "%q: want 1 or true, 0 or false", cut(v, 40))
	}
}

// queryWait reads wait= in seconds (fractions allowed), at most api.MaxWait.
func queryWait(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f != f {
		return 0, fieldErr("wait", "%q is not a non-negative number of seconds", cut(v, 40))
	}
	if f > api.MaxWait.Seconds() {
		return 0, fieldErr("wait", "%s seconds is above the maximum %d; ask again instead", v, int(api.MaxWait.Seconds()))
	}
	return time.Duration(f * float64(time.Second)), nil
}

// decodeID checks a job id or prefix from a path or body: 6 to 32 hex
// characters, case-insensitive.
func decodeID(field, raw string) (string, error) {
	id := strings.ToLower(raw)
	switch {
	case raw == "":
		return "", fieldErr(field, "required: a job id or a unique prefix of at least %d characters", api.MinIDPrefix)
	case len(id) > store.IDLen || !store.IsHex(id):
		return "", fieldErr(field, "%q is not a job id (up to %d hex characters)", cut(raw, 40), store.IDLen)
	case len(id) < api.MinIDPrefix:
		return "", fieldErr(field, "%q is too short: give at least %d characters of the id", raw, api.MinIDPrefix)
	}
	return id, nil
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
