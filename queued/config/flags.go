package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/alecthomas/kong"
)

// Flags returns the kong options that read queued's flags into a Config
// embedded (tagged embed:"") in its command-line struct, which holds c:
// the mappers for seconds and card lists, and a resolver that gives each
// flag not on the command line c's value, so a flag overrides its
// variable and the variable (or the default) stands otherwise. c is
// FromEnv's result; the settings without a flag (kong:"-") keep c's
// values untouched. Validate the result: kong checks a flag's syntax,
// Validate its bounds.
func Flags(c Config) []kong.Option {
	v := reflect.ValueOf(c)
	byFlag := map[string]Setting{}
	for _, s := range Settings {
		if s.Flag != "" {
			byFlag[s.Flag] = s
		}
	}
	// The values are c's, written as the variables would give them and
	// read back by the flags' mappers: for the flags not given, kong
	// applies these last, over whatever its own reading of the
	// environment found.
	resolve := kong.ResolverFunc(func(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
		s, ok := byFlag["--"+flag.Name]
		if !ok {
			return nil, nil
		}
		return s.format(v.Field(s.field)), nil
	})
	return []kong.Option{
		kong.Vars(defaultVarMap()),
		kong.Resolvers(resolve),
		kong.NamedMapper("seconds", flagMapper{}),
		kong.NamedMapper("cards", flagMapper{}),
	}
}

// flagMapper reads a flag's value as its variable's is read (seconds,
// card lists); a blank value is the setting's zero (no cards named).
type flagMapper struct{}

func (flagMapper) Decode(ctx *kong.DecodeContext, target reflect.Value) error {
	t, err := ctx.Scan.PopValue("value")
	if err != nil {
		return err
	}
	raw := strings.TrimSpace(fmt.Sprint(t.Value))
	if raw == "" {
		target.Set(reflect.Zero(target.Type()))
		return nil
	}
	for _, s := range Settings {
		if s.Flag == "--"+ctx.Value.Name {
			x, err := s.read(raw)
			if err != nil {
				return fmt.Errorf("%q: %w", raw, err)
			}
			target.Set(x)
			return nil
		}
	}
	return fmt.Errorf("--%s is not one of queued's settings", ctx.Value.Name)
}
