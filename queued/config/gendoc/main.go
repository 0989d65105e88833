// Command gendoc writes the settings table of docs/operations.md from
// queued's declaration of its settings (config.Settings), between the
// table's markers: `go generate ./queued/config` runs it, and its test
// fails `make test` when the file and the declaration differ.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/ttkit/ttkit/queued/config"
)

// The markers around the generated table.
const (
	begin = "<!-- BEGIN settings table: generated from queued/config/config.go by `go generate ./queued/config`; edit the declaration, not this table -->"
	end   = "<!-- END settings table -->"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendoc docs/operations.md")
		os.Exit(2)
	}
	if err := rewrite(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}

// rewrite replaces the table in the Markdown file at path.
func rewrite(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc, err := splice(string(b), table(config.Settings))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if doc == string(b) {
		return nil
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// errNoMarkers means the document lacks the table's markers.
var errNoMarkers = errors.New("no settings table markers (" + begin + " ... " + end + ")")

// splice returns doc with what lies between the markers replaced by tbl.
func splice(doc, tbl string) (string, error) {
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", errNoMarkers
	}
	return doc[:i+len(begin)] + "\n\n" + tbl + "\n" + doc[j:], nil
}

// table renders the settings as a Markdown table, one row each.
func table(settings []config.Setting) string {
	var b strings.Builder
	b.WriteString("| setting | default | environment variable | flag |\n| --- | --- | --- | --- |\n")
	for _, s := range settings {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", text(s.Help), defaultCell(s), code(s.Env), code(s.Flag))
	}
	return b.String()
}

// defaultCell shows a declared value as code, with its unit; a default
// that is described (the state directory's) as text.
func defaultCell(s config.Setting) string {
	if !s.Declared() {
		return text(s.Default)
	}
	switch s.Unit {
	case "seconds":
		return code(s.Default) + " seconds"
	case "bytes":
		return code(s.Default) + " (" + size(s.Default) + ")"
	}
	return code(s.Default)
}

// size writes a byte count as the largest binary unit that divides it.
func size(raw string) string {
	var n int64
	fmt.Sscan(raw, &n)
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n > 0 && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// text makes s safe in a table cell: a bar would end the cell, angle
// brackets would be read as HTML.
func text(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

// code is s as a code span, or a dash for nothing.
func code(s string) string {
	if s == "" {
		return "—"
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}
