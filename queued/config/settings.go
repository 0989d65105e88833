package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttkit/ttkit/queued/api"
	"github.com/ttkit/ttkit/queued/cpupin"
	"github.com/ttkit/ttkit/queued/defaults"
)

// Setting is one of queued's settings as Config declares it: what --help,
// tt-device-queue doctor and the settings table of docs/operations.md
// show, and how FromEnv, Default, Validate and the daemon's flags read and
// check its value.
type Setting struct {
	// Env is the environment variable that sets it; empty for a daemon
	// flag that has none (--listen).
	Env string
	// Flag is queued's flag for it, such as "--max-queued-jobs"; empty
	// when only the variable sets it.
	Flag string
	// Default is the default as people read it: the declared value, or
	// what queued does when the setting is not given.
	Default string
	// Help says what the setting sets.
	Help string
	// Unit is what a number counts, "seconds" or "bytes"; empty for
	// plain counts and for what is not a number.
	Unit string
	// SystemOnly says only system mode reads it: given in user mode, it
	// is refused.
	SystemOnly bool

	fieldName string
	field     int    // index in Config
	kind      kind   // how the value is read
	def       string // the default tag, as the variable would give it
	min, max  int64  // bounds of a number; see hasMin, hasMax
	hasMin    bool
	hasMax    bool
	mustBe    string // abspath, account or socket: what a string must be
}

// kind is how a setting's value is read, from its Go type.
type kind int

const (
	kindInt         kind = iota // int
	kindBytes                   // int64, a size in bytes
	kindSeconds                 // time.Duration, whole seconds (type:"seconds")
	kindCards                   // []int, card numbers (type:"cards")
	kindOptionalInt             // *int: a number, or none for nil
	kindBool                    // bool: 1 or 0
	kindString                  // string
)

// Settings lists every setting in Config's order: the seed's table, then
// the ones queued adds. It is read from Config's struct tags once, at
// start.
var Settings = declared()

// helpVars are the ${names} a help text may use, so a path named in two
// places is written once.
var helpVars = strings.NewReplacer("${system_socket}", api.SystemSocket, "${system_state_dir}", DefaultSystemStateDir)

// defaultVars are the ${names} a default tag may use: the defaults other
// packages fall back on too, declared in package defaults (and the request
// limits in api, which owns the wire), so each is written once.
var defaultVars = func() *strings.Replacer {
	var pairs []string
	for name, v := range defaultVarMap() {
		pairs = append(pairs, "${"+name+"}", v)
	}
	return strings.NewReplacer(pairs...)
}()

// defaultVarMap is the values of the ${names} default tags use, as kong's
// variables (the daemon's flags read the same tags).
func defaultVarMap() map[string]string {
	vars := map[string]string{
		"DefaultMaxRequestBytes":   strconv.Itoa(api.DefaultMaxRequestBytes),
		"DefaultMaxTimeoutSeconds": strconv.Itoa(api.DefaultMaxTimeoutSeconds),
	}
	for name, v := range defaults.Vars {
		vars[name] = fmt.Sprint(v)
		if b, ok := v.(bool); ok { // written as the variables are: 1 or 0
			vars[name] = Setting{kind: kindBool}.format(reflect.ValueOf(b))
		}
	}
	return vars
}

// declared reads Config's struct tags. A declaration it cannot read is a
// programming error and panics at start (every test of this package
// starts it).
func declared() []Setting {
	t := reflect.TypeFor[Config]()
	var out []Setting
	for i := range t.NumField() {
		f := t.Field(i)
		env, flag := f.Tag.Get("env"), f.Tag.Get("name")
		if f.Tag.Get("kong") == "-" {
			flag = ""
		}
		if env == "" && flag == "" {
			continue // Mode, PortSet: decided, not set
		}
		s := Setting{Env: env, Help: helpVars.Replace(f.Tag.Get("help")), SystemOnly: api.Mode(f.Tag.Get("mode")).System(),
			fieldName: f.Name, field: i, def: defaultVars.Replace(f.Tag.Get("default")), mustBe: f.Tag.Get("check")}
		if flag != "" {
			s.Flag = "--" + flag
		}
		switch {
		case f.Type == reflect.TypeFor[time.Duration]() && f.Tag.Get("type") == "seconds":
			s.kind, s.Unit = kindSeconds, "seconds"
			s.max, s.hasMax = api.MaxSeconds, true
		case f.Type == reflect.TypeFor[[]int]() && f.Tag.Get("type") == "cards":
			s.kind = kindCards
		case f.Type == reflect.TypeFor[*int]():
			s.kind = kindOptionalInt
		case f.Type == reflect.TypeFor[int64]():
			s.kind, s.Unit = kindBytes, "bytes"
		case f.Type == reflect.TypeFor[int]():
			s.kind = kindInt
		case f.Type == reflect.TypeFor[bool]():
			s.kind = kindBool
		case f.Type == reflect.TypeFor[string]():
			s.kind = kindString
		default:
			panic(fmt.Sprintf("config: setting %s has type %s, which no kind reads", f.Name, f.Type))
		}
		for _, b := range []struct {
			tag string
			n   *int64
			has *bool
		}{{"min", &s.min, &s.hasMin}, {"max", &s.max, &s.hasMax}} {
			if v, ok := f.Tag.Lookup(b.tag); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					panic(fmt.Sprintf("config: setting %s: %s:%q is not a number", f.Name, b.tag, v))
				}
				*b.n, *b.has = n, true
			}
		}
		switch {
		case f.Tag.Get("doc") != "":
			s.Default = f.Tag.Get("doc")
		case s.def != "":
			s.Default = s.def
		default:
			s.Default = "none"
		}
		out = append(out, s)
	}
	return out
}

// Declared reports whether Default is the declared value, as the
// variable would give it, rather than a description of what queued does
// without one.
func (s Setting) Declared() bool {
	return s.def != "" && s.Default == s.def
}

// setting returns the declaration of Config's field name.
func setting(name string) Setting {
	for _, s := range Settings {
		if s.fieldName == name {
			return s
		}
	}
	panic("config: no setting " + name)
}

// name is how an error names s: by its flag when it has one (a bad value
// that gets past FromEnv came from the command line), else its variable.
func (s Setting) name() string {
	if s.Flag != "" {
		return s.Flag
	}
	return s.Env
}

// names is every name of Config's field for messages about two settings:
// "TT_DEVICE_MAX_TIMEOUT or --max-timeout".
func names(field string) string {
	s := setting(field)
	switch {
	case s.Env == "":
		return s.Flag
	case s.Flag == "":
		return s.Env
	}
	return s.Env + " or " + s.Flag
}

// parse reads raw, as the variable gives it, into a value of the field's
// type, and checks it; the error says what is wanted, without the name or
// the value (the caller adds them).
func (s Setting) parse(raw string) (reflect.Value, error) {
	x, err := s.read(raw)
	if err != nil {
		return reflect.Value{}, err
	}
	if err := s.check(x); err != nil {
		return reflect.Value{}, err
	}
	return x, nil
}

// read is parse without the check: the syntax alone. A flag is read so,
// and its value checked by Validate.
func (s Setting) read(raw string) (reflect.Value, error) {
	var v any
	switch s.kind {
	case kindInt:
		n, err := strconv.Atoi(raw)
		if err != nil {
			return reflect.Value{}, errors.New(s.want())
		}
		v = n
	case kindBytes:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return reflect.Value{}, errors.New(s.want())
		}
		v = n
	case kindSeconds:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n > api.MaxSeconds || n < -api.MaxSeconds { // beyond the bounds and time.Duration's
			return reflect.Value{}, errors.New(s.want())
		}
		v = time.Duration(n) * time.Second
	case kindCards:
		ids, err := ParseDevices(raw)
		if err != nil {
			return reflect.Value{}, err
		}
		v = ids
	case kindOptionalInt:
		var p *int
		if raw != "none" {
			n, err := strconv.Atoi(raw)
			if err != nil {
				return reflect.Value{}, errors.New(s.want())
			}
			p = &n
		}
		v = p
	case kindBool:
		switch raw {
		case "1", "true", "yes":
			v = true
		case "0", "false", "no":
			v = false
		default:
			return reflect.Value{}, errors.New(s.want())
		}
	case kindString:
		if strings.ContainsRune(raw, 0) {
			return reflect.Value{}, errors.New("contains a NUL byte")
		}
		if s.mustBe == "abspath" || s.mustBe == "socket" {
			// Checked before it is cleaned: "proc/../x" is not absolute.
			if err := s.checkString(raw); err != nil {
				return reflect.Value{}, err
			}
			raw = filepath.Clean(raw)
		}
		v = raw
	}
	return reflect.ValueOf(v), nil
}

// unset reports whether x is the zero value of a setting without a
// default: not given (no cards named, no task limit), which Validate
// accepts though a value given could not be zero.
func (s Setting) unset(x reflect.Value) bool {
	return s.def == "" && x.IsZero()
}

// check checks a value of the field's type against the declaration.
func (s Setting) check(x reflect.Value) error {
	switch s.kind {
	case kindInt, kindBytes:
		if !s.within(x.Int()) {
			return errors.New(s.want())
		}
	case kindSeconds:
		d := time.Duration(x.Int())
		if d%time.Second != 0 || !s.within(int64(d/time.Second)) {
			return errors.New(s.want())
		}
	case kindOptionalInt:
		if !x.IsNil() && !s.within(x.Elem().Int()) {
			return errors.New(s.want())
		}
	case kindString:
		v := x.String()
		if strings.ContainsRune(v, 0) {
			return errors.New("contains a NUL byte")
		}
		return s.checkString(v)
	}
	return nil
}

// checkString checks a string setting's value against its check tag.
func (s Setting) checkString(v string) error {
	switch s.mustBe {
	case "":
		return nil
	case "abspath":
		if !filepath.IsAbs(v) {
			return errors.New("want an absolute path")
		}
		return nil
	case "socket":
		return checkSocket(v)
	case "account":
		return checkAccount(v)
	case "rungs":
		_, err := ParseRecoveryCmds(v)
		return err
	case "cpu":
		return cpupin.CheckSetting(v)
	}
	if set, ok := strings.CutPrefix(s.mustBe, "oneof="); ok {
		if slices.Contains(strings.Split(set, "|"), v) {
			return nil
		}
		return fmt.Errorf("want one of %s", strings.ReplaceAll(set, "|", ", "))
	}
	panic(fmt.Sprintf("config: setting %s: unknown check %q", s.fieldName, s.mustBe))
}

// within reports whether n is within the declared bounds.
func (s Setting) within(n int64) bool {
	return (!s.hasMin || n >= s.min) && (!s.hasMax || n <= s.max)
}

// want says what a value must be, for an error.
func (s Setting) want() string {
	what := map[kind]string{kindBytes: "a whole number of bytes", kindSeconds: "a whole number of seconds"}[s.kind]
	switch s.kind {
	case kindBool:
		return "want 1 or 0"
	case kindOptionalInt:
		return fmt.Sprintf("want a whole number from %d to %d, or none", s.min, s.max)
	case kindBytes, kindSeconds:
		return fmt.Sprintf("want %s, at least %d", what, s.min)
	}
	switch {
	case s.hasMin && s.hasMax:
		return fmt.Sprintf("want a whole number from %d to %d", s.min, s.max)
	case s.hasMin:
		return fmt.Sprintf("want a whole number of at least %d", s.min)
	}
	return "want a whole number"
}

// format writes a value of the field's type as the variable would give it.
func (s Setting) format(x reflect.Value) string {
	switch s.kind {
	case kindInt, kindBytes:
		return strconv.FormatInt(x.Int(), 10)
	case kindSeconds:
		return strconv.FormatInt(int64(time.Duration(x.Int())/time.Second), 10)
	case kindCards:
		ids := make([]string, x.Len())
		for i := range ids {
			ids[i] = strconv.Itoa(int(x.Index(i).Int()))
		}
		return strings.Join(ids, ",")
	case kindOptionalInt:
		if x.IsNil() {
			return "none"
		}
		return strconv.FormatInt(x.Elem().Int(), 10)
	case kindBool:
		if x.Bool() {
			return "1"
		}
		return "0"
	}
	return x.String()
}

// Given is a setting the environment gives a value.
type Given struct {
	Setting
	// Value is the value as given, without surrounding blanks.
	Value string
}

// GivenBy lists the settings lookup gives a value (set and not blank), in
// Settings' order: what an operator changed from the defaults. doctor
// shows them.
func GivenBy(lookup Lookup) []Given {
	var out []Given
	for _, s := range Settings {
		if s.Env == "" {
			continue
		}
		if v, ok := lookup(s.Env); ok && strings.TrimSpace(v) != "" {
			out = append(out, Given{s, strings.TrimSpace(v)})
		}
	}
	return out
}
