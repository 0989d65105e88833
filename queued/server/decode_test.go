package server

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeObject(t *testing.T) {
	t.Parallel()
	known := []string{"cmd", "cwd", "env", "timeout"}
	cases := []struct {
		name, body string
		// want is the whole error message, "" for an accepted body.
		want string
	}{
		{"plain object", `{"cmd":"true","cwd":"/","env":{"A":"1","B":"2"}}`, ""},
		{"huge number is still JSON", `{"timeout":1e400}`, ""},
		{"same key in different objects", `{"env":{"cmd":"x"},"cmd":"y"}`, ""},
		{"same key in sibling objects", `{"env":[{"A":1},{"A":2}]}`, ""},
		{"repeated field", `{"cmd":"true","cmd":"touch x","cwd":"/"}`, "cmd: given more than once"},
		{"repeated field, escaped", `{"cmd":"true","c\u006dd":"touch x"}`, "cmd: given more than once"},
		{"repeated field, null first", `{"cmd":null,"cmd":"true"}`, "cmd: given more than once"},
		{"repeated env name", `{"cmd":"true","env":{"A":"1","B":"2","A":"3"}}`, `env: key "A" given more than once`},
		{"repeated key deeper", `{"env":{"A":{"x":1,"y":{"z":1,"z":2}}}}`, `env: key "z" given more than once`},
		{"repeated key in an array", `{"cmd":[{"a":1,"a":1}]}`, `cmd: key "a" given more than once`},
		{"repeated empty env name", `{"env":{"":"1","":"2"}}`, `env: key "" given more than once`},
		{"empty key", `{"":1,"cmd":"true"}`, `"": unknown field (known: cmd, cwd, env, timeout)`},
		{"key with a newline", `{"a\nINFO forged":1}`, `"a\nINFO forged": unknown field (known: cmd, cwd, env, timeout)`},
		{"key with a leading space", `{" cmd":1}`, `" cmd": unknown field (known: cmd, cwd, env, timeout)`},
		{"upper-case key", `{"CMD":"true"}`, `CMD: unknown field (known: cmd, cwd, env, timeout)`},
		{"long key is cut", `{"` + strings.Repeat("k", 5000) + `":1}`, `"` + strings.Repeat("k", 64) + `...": unknown field (known: cmd, cwd, env, timeout)`},
		{"unknown before repeated", `{"x":1,"cmd":"a","cmd":"b"}`, `x: unknown field (known: cmd, cwd, env, timeout)`},
		{"repeated before unknown", `{"cmd":"a","cmd":"b","x":1}`, "cmd: given more than once"},
		{"repeated unknown", `{"x":1,"x":2}`, `x: unknown field (known: cmd, cwd, env, timeout)`},
		{"broken JSON beats a bad field", `{"x":1,"cmd":"a","cmd":`, "body: want one JSON object"},
		{"trailing data beats a bad field", `{"cmd":"a","cmd":"b"} {}`, "body: unexpected data after the JSON object"},
		{"not an object", `["cmd"]`, "body: want one JSON object"},
		{"key not a string", `{1:2}`, "body: want one JSON object"},
		{"too deep", `{"env":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, "body: want one JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fields, err := decodeObject([]byte(tc.body), known)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if len(fields) == 0 {
					t.Fatalf("no fields")
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestFieldLabel(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"cmd": "cmd", "job id": "job id", "device_id": "device_id", "": `""`, " x": `" x"`, "x ": `"x "`,
		"a:b": `"a:b"`, "é": `"é"`, "a\x00b": `"a\x00b"`, strings.Repeat("a", 65): `"` + strings.Repeat("a", 64) + `..."`,
	} {
		if got := fieldLabel(name); got != want {
			t.Errorf("fieldLabel(%q) = %s, want %s", name, got, want)
		}
	}
}
