package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeObject checks decodeObject against the json.Decoder walk it
// replaced: the same fields for an accepted body, the same message for a
// refused one.
func FuzzDecodeObject(f *testing.F) {
	for _, seed := range []string{
		`{"cmd":"true","cwd":"/","env":{"A":"1","B":"2"}}`, `{"timeout":1e400}`, `{"env":[{"A":1},{"A":2}]}`,
		`{"cmd":"a","c\u006dd":"b"}`, `{"env":{"A":{"x":1,"y":{"z":1,"z":2}}}}`, `{"":1}`, ` { "cmd" : "x" , "env" : { } } `,
		`{"cmd":"a","cmd":"b"} {}`, `{"x":1,"cmd":"a","cmd":`, `["cmd"]`, `{1:2}`, `{"cmd":"\"}\\"}`, `{}`, `{"env":[]}`,
	} {
		f.Add([]byte(seed))
	}
	known := []string{"cmd", "cwd", "env", "timeout"}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			return // readObject refuses it before decodeObject
		}
		got, err := decodeObject(body, known)
		want, wantErr := referenceDecodeObject(body, known)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("body %q: error %v, the reference says %v", body, err, wantErr)
		}
		if len(got) != len(want) {
			t.Fatalf("body %q: fields %q, the reference says %q", body, got, want)
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("body %q: field %s is %q, the reference says %q", body, k, got[k], v)
			}
		}
	})
}

// referenceDecodeObject is the json.Decoder token walk decodeObject
// replaced, kept as the oracle FuzzDecodeObject compares it with. It splits one JSON object into its raw fields, refusing a
// field not in known and a key given twice in any object, at the top or
// nested (env). It walks the keys itself because unmarshalling into a map
// lets the last of two equal keys win silently, so {"cmd":"ls","cmd":"rm"}
// would run whichever a reader of the body did not expect. Keys are
// compared after unescaping: "c\u006dd" is cmd. A body that is not one
// JSON object is refused before any field is judged.
func referenceDecodeObject(body []byte, known []string) (map[string]json.RawMessage, error) {
	notObject := fieldErr("body", "want one JSON object")
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers stay text: 1e400 is valid JSON, not a float64 overflow
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, notObject
	}
	fields := make(map[string]json.RawMessage, len(known))
	var refused error // the first bad field; reported once the body is known to be JSON
	for dec.More() {
		tok, err := dec.Token()
		name, isKey := tok.(string)
		if err != nil || !isKey {
			return nil, notObject
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, notObject
		}
		if refused != nil {
			continue
		}
		if !contains(known, name) {
			refused = fieldErr(name, "unknown field (known: %s)", strings.Join(known, ", "))
		} else if _, twice := fields[name]; twice {
			refused = fieldErr(name, "given more than once")
		} else if key, twice := referenceRepeatedKey(raw); twice {
			refused = fieldErr(name, "key %s given more than once", strconv.Quote(cut(key, 64)))
		}
		fields[name] = raw
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, notObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fieldErr("body", "unexpected data after the JSON object")
	}
	if refused != nil {
		return nil, refused
	}
	return fields, nil
}

// referenceRepeatedKey returns the first key that appears twice in one object
// anywhere inside raw, a value the decoder has already read whole (so it
// is valid JSON no deeper than encoding/json's nesting limit).
func referenceRepeatedKey(raw json.RawMessage) (string, bool) {
	if t := jsonType(raw); t != "an object" && t != "an array" {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	key, twice, _ := referenceNextRepeatedKey(dec)
	return key, twice
}

// referenceNextRepeatedKey reads one value from dec, looking for a key repeated in
// one of its objects; it stops at the first.
func referenceNextRepeatedKey(dec *json.Decoder) (key string, twice bool, err error) {
	tok, err := dec.Token()
	if err != nil {
		return "", false, err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return "", false, err
			}
			k, _ := tok.(string)
			if seen[k] {
				return k, true, nil
			}
			seen[k] = true
			if key, twice, err := referenceNextRepeatedKey(dec); twice || err != nil {
				return key, twice, err
			}
		}
	case json.Delim('['):
		for dec.More() {
			if key, twice, err := referenceNextRepeatedKey(dec); twice || err != nil {
				return key, twice, err
			}
		}
	default:
		return "", false, nil
	}
	_, err = dec.Token() // the closing delimiter
	return "", false, err
}
