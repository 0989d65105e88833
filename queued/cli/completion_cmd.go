package cli

import (
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/alecthomas/kong"
)

// CompletionCmd prints a completion script generated from the command
// model, so it always lists the commands and flags this binary has.
type CompletionCmd struct {
	Shell string `arg:"" enum:"bash,zsh" placeholder:"SHELL" help:"Shell to complete for: ${enum}."`
}

// Help tells how to install the script.
func (c *CompletionCmd) Help() string {
	return "bash: add `source <(" + Name + " completion bash)` to ~/.bashrc.\n" +
		"zsh: add `source <(" + Name + " completion zsh)` to ~/.zshrc (after compinit)."
}

// Run prints the script.
func (c *CompletionCmd) Run(k *kong.Context, a *App) error {
	m := completionModel(k.Model.Node)
	if c.Shell == "zsh" {
		writeZsh(a.Out, m)
	} else {
		writeBash(a.Out, m)
	}
	return nil
}

// compFlag and compCmd are the parts of the kong model a completion script
// needs.
type compFlag struct {
	name, short, help string
	takesValue        bool
	repeatable        bool
	enum              []string
	dirs              bool
}

type compCmd struct {
	name, help string
	flags      []compFlag
	// args are the positional arguments' completions: "files", an enum
	// list, or "" for free text.
	args [][]string
}

type compModel struct {
	globals []compFlag
	cmds    []compCmd
}

func completionModel(app *kong.Node) compModel {
	m := compModel{globals: compFlags(app.Flags)}
	m.globals = append(m.globals, compFlag{name: "help", short: "h", help: "Show context-sensitive help."})
	for _, n := range app.Children {
		if n.Hidden {
			continue
		}
		c := compCmd{name: n.Name, help: n.Help, flags: compFlags(n.Flags)}
		for _, p := range n.Positional {
			switch {
			case p.Enum != "":
				c.args = append(c.args, p.EnumSlice())
			case p.Name == "script" || p.Name == "path":
				c.args = append(c.args, []string{"files"})
			default:
				c.args = append(c.args, nil)
			}
		}
		m.cmds = append(m.cmds, c)
	}
	return m
}

func compFlags(flags []*kong.Flag) []compFlag {
	var out []compFlag
	for _, f := range flags {
		if f.Hidden || f.Name == "help" {
			continue
		}
		cf := compFlag{name: f.Name, help: f.Help, takesValue: !f.IsBool(), dirs: f.Name == "cwd",
			repeatable: f.Target.Kind() == reflect.Slice}
		if f.Short != 0 {
			cf.short = string(f.Short)
		}
		if f.Enum != "" {
			cf.enum = f.EnumSlice()
		}
		out = append(out, cf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func flagWords(flags []compFlag) string {
	var w []string
	for _, f := range flags {
		w = append(w, "--"+f.name)
		if f.short != "" {
			w = append(w, "-"+f.short)
		}
	}
	return strings.Join(w, " ")
}

// writeBash prints a bash completion function: the subcommand is the
// first word that is neither a flag nor a global flag's value.
func writeBash(w io.Writer, m compModel) {
	fn := "_" + strings.ReplaceAll(Name, "-", "_")
	var valued []string
	for _, f := range m.globals {
		if f.takesValue {
			valued = append(valued, "--"+f.name)
		}
	}
	var names []string
	for _, c := range m.cmds {
		names = append(names, c.name)
	}
	fmt.Fprintf(w, "# bash completion for %s; load it with: source <(%s completion bash)\n", Name, Name)
	fmt.Fprintf(w, "%s() {\n", fn)
	fmt.Fprint(w, "\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\" cmd=\"\" i\n")
	fmt.Fprint(w, "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n\t\tcase \"${COMP_WORDS[i]}\" in\n")
	if len(valued) > 0 {
		fmt.Fprintf(w, "\t\t%s) ((i++)) ;;\n", strings.Join(valued, "|"))
	}
	fmt.Fprint(w, "\t\t-*) ;;\n\t\t*) cmd=\"${COMP_WORDS[i]}\"; break ;;\n\t\tesac\n\tdone\n")
	fmt.Fprint(w, "\tcase \"$prev\" in\n\t--cwd) COMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n")
	valuedAll := map[string]bool{}
	for _, f := range m.globals {
		if f.takesValue {
			valuedAll["--"+f.name] = true
		}
	}
	for _, c := range m.cmds {
		for _, f := range c.flags {
			if f.takesValue && f.name != "cwd" {
				valuedAll["--"+f.name] = true
				if f.short != "" {
					valuedAll["-"+f.short] = true
				}
			}
		}
	}
	var vs []string
	for v := range valuedAll {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	fmt.Fprintf(w, "\t%s) return ;;\n\tesac\n", strings.Join(vs, "|"))
	fmt.Fprintf(w, "\tif [[ -z \"$cmd\" ]]; then\n\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\treturn\n\tfi\n",
		strings.Join(names, " ")+" "+flagWords(m.globals))
	fmt.Fprint(w, "\tcase \"$cmd\" in\n")
	for _, c := range m.cmds {
		words := flagWords(append(c.flags, compFlag{name: "help", short: "h"}))
		files := false
		for _, a := range c.args {
			if len(a) == 1 && a[0] == "files" {
				files = true
			} else {
				words += " " + strings.Join(a, " ")
			}
		}
		fmt.Fprintf(w, "\t%s)\n\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n", c.name, strings.TrimSpace(words))
		if files {
			fmt.Fprint(w, "\t\t[[ \"$cur\" != -* ]] && COMPREPLY+=($(compgen -f -- \"$cur\"))\n")
		}
		fmt.Fprint(w, "\t\t;;\n")
	}
	fmt.Fprint(w, "\tesac\n}\n")
	fmt.Fprintf(w, "complete -o filenames -F %s %s\n", fn, Name)
}

// zshQuote escapes text for a single-quoted word; zshHelp also escapes
// the brackets that delimit an _arguments description.
func zshQuote(s string) string { return strings.ReplaceAll(s, "'", `'\''`) }

func zshHelp(s string) string {
	return strings.NewReplacer("'", `'\''`, "[", `\[`, "]", `\]`).Replace(strings.TrimSuffix(s, "."))
}

func zshSpecs(flags []compFlag) []string {
	var out []string
	for _, f := range flags {
		action := ""
		if f.takesValue {
			switch {
			case f.dirs:
				action = ":dir:_files -/"
			case len(f.enum) > 0:
				action = ":value:(" + strings.Join(f.enum, " ") + ")"
			default:
				action = ":value: "
			}
		}
		eq := ""
		if f.takesValue {
			eq = "="
		}
		prefix := ""
		if f.repeatable {
			prefix = "*"
		}
		help := zshHelp(f.help)
		if f.short != "" && !f.repeatable {
			out = append(out, fmt.Sprintf("'(-%s --%s)'{-%s,--%s%s}'[%s]%s'", f.short, f.name, f.short, f.name, eq, help, zshQuote(action)))
		} else {
			if f.short != "" {
				out = append(out, fmt.Sprintf("'%s-%s[%s]%s'", prefix, f.short, help, zshQuote(action)))
			}
			out = append(out, fmt.Sprintf("'%s--%s%s[%s]%s'", prefix, f.name, eq, help, zshQuote(action)))
		}
	}
	return out
}

// writeZsh prints a #compdef function built on _arguments.
func writeZsh(w io.Writer, m compModel) {
	fn := "_" + strings.ReplaceAll(Name, "-", "_")
	fmt.Fprintf(w, "#compdef %s\n# zsh completion for %s; load it with: source <(%s completion zsh)\n", Name, Name, Name)
	fmt.Fprintf(w, "%s() {\n\tlocal curcontext=\"$curcontext\" state line\n\ttypeset -A opt_args\n\tlocal -a commands\n\tcommands=(\n", fn)
	for _, c := range m.cmds {
		fmt.Fprintf(w, "\t\t'%s:%s'\n", c.name, zshQuote(strings.TrimSuffix(c.help, ".")))
	}
	fmt.Fprint(w, "\t)\n\t_arguments -C \\\n")
	for _, s := range zshSpecs(m.globals) {
		fmt.Fprintf(w, "\t\t%s \\\n", s)
	}
	fmt.Fprint(w, "\t\t'1: :->command' \\\n\t\t'*:: :->args'\n")
	fmt.Fprint(w, "\tcase $state in\n\tcommand) _describe -t commands command commands ;;\n\targs)\n\t\tcase $words[1] in\n")
	for _, c := range m.cmds {
		specs := zshSpecs(append(c.flags, compFlag{name: "help", short: "h", help: "Show context-sensitive help."}))
		for i, a := range c.args {
			switch {
			case len(a) == 1 && a[0] == "files":
				specs = append(specs, fmt.Sprintf("'%d:file:_files'", i+1))
			case len(a) > 0:
				specs = append(specs, fmt.Sprintf("'%d:value:(%s)'", i+1, strings.Join(a, " ")))
			}
		}
		fmt.Fprintf(w, "\t\t%s)\n\t\t\t_arguments \\\n", c.name)
		for i, s := range specs {
			end := " \\"
			if i == len(specs)-1 {
				end = ""
			}
			fmt.Fprintf(w, "\t\t\t\t%s%s\n", s, end)
		}
		fmt.Fprint(w, "\t\t\t;;\n")
	}
	fmt.Fprintf(w, "\t\tesac\n\t\t;;\n\tesac\n}\n")
	fmt.Fprintf(w, "if [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n\t%s \"$@\"\nelse\n\tcompdef %s %s\nfi\n", fn, fn, Name)
}
