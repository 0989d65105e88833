package cli

import (
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/ttkit/ttkit/queued/api"
)

// CompletionCmd prints a completion script generated from the command
// model, so it always lists the commands and flags this binary has.
type CompletionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" placeholder:"SHELL" help:"Shell to complete for: ${enum}."`
}

// Help tells how to install the script.
func (c *CompletionCmd) Help() string {
	return "bash: add `source <(" + Name + " completion bash)` to ~/.bashrc.\n" +
		"zsh: add `source <(" + Name + " completion zsh)` to ~/.zshrc (after compinit).\n" +
		"fish: run `" + Name + " completion fish > ~/.config/fish/completions/" + Name + ".fish`.\n" +
		"Job ids and card numbers are completed from the running queued."
}

// Run prints the script.
func (c *CompletionCmd) Run(k *kong.Context, a *App) error {
	m := completionModel(k.Model.Node)
	switch c.Shell {
	case "zsh":
		writeZsh(a.Out, m)
	case "fish":
		writeFish(a.Out, m)
	default:
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
	cards             bool // a card number, completed from the daemon
}

type compCmd struct {
	name, help string
	flags      []compFlag
	// args are the positional arguments' completions: "files", "jobs"
	// (ids from the daemon), an enum list, or nil for free text.
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
			case p.Tag != nil && p.Tag.PlaceHolder == "JOB_ID":
				c.args = append(c.args, []string{"jobs"})
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
			repeatable: f.Target.Kind() == reflect.Slice, cards: f.Name == "device"}
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
	fmt.Fprintf(w, "\t--device|-d) COMPREPLY=($(compgen -W \"$(%s __complete cards 2>/dev/null)\" -- \"$cur\")); return ;;\n", Name)
	valuedAll := map[string]bool{}
	for _, f := range m.globals {
		if f.takesValue {
			valuedAll["--"+f.name] = true
		}
	}
	for _, c := range m.cmds {
		for _, f := range c.flags {
			if f.takesValue && f.name != "cwd" && !f.cards {
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
		files, jobs := false, false
		for _, a := range c.args {
			switch {
			case len(a) == 1 && a[0] == "files":
				files = true
			case len(a) == 1 && a[0] == "jobs":
				jobs = true
			default:
				words += " " + strings.Join(a, " ")
			}
		}
		fmt.Fprintf(w, "\t%s)\n\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n", c.name, strings.TrimSpace(words))
		if files {
			fmt.Fprint(w, "\t\t[[ \"$cur\" != -* ]] && COMPREPLY+=($(compgen -f -- \"$cur\"))\n")
		}
		if jobs {
			fmt.Fprintf(w, "\t\t[[ \"$cur\" != -* ]] && COMPREPLY+=($(compgen -W \"$(%s __complete jobs 2>/dev/null)\" -- \"$cur\"))\n", Name)
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
			case f.cards:
				action = ":card:" + zshFn() + "_cards"
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

// zshFn is the name of the zsh completion function.
func zshFn() string { return "_" + strings.ReplaceAll(Name, "-", "_") }

// writeZsh prints a #compdef function built on _arguments.
func writeZsh(w io.Writer, m compModel) {
	fn := zshFn()
	fmt.Fprintf(w, "#compdef %s\n# zsh completion for %s; load it with: source <(%s completion zsh)\n", Name, Name, Name)
	fmt.Fprintf(w, "%s_jobs() {\n\tlocal -a ids\n\tids=(${(f)\"$(%s __complete jobs 2>/dev/null)\"})\n\t_describe 'job id' ids\n}\n", fn, Name)
	fmt.Fprintf(w, "%s_cards() {\n\tlocal -a cards\n\tcards=(${(f)\"$(%s __complete cards 2>/dev/null)\"})\n\t_describe 'card' cards\n}\n", fn, Name)
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
			case len(a) == 1 && a[0] == "jobs":
				specs = append(specs, fmt.Sprintf("'*:job id:%s_jobs'", zshFn()))
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

// fishQuote single-quotes text for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(strings.TrimSuffix(s, ".")) + "'"
}

// fishFlag is one complete line's flag part.
func fishFlag(f compFlag) string {
	out := "-l " + f.name
	if f.short != "" {
		out += " -s " + f.short
	}
	switch {
	case f.cards:
		out += " -x -a '(" + Name + " __complete cards 2>/dev/null)'"
	case f.dirs:
		out += " -r -a '(__fish_complete_directories)'"
	case len(f.enum) > 0:
		out += " -x -a " + fishQuote(strings.Join(f.enum, " "))
	case f.takesValue:
		out += " -x"
	}
	return out + " -d " + fishQuote(f.help)
}

// writeFish prints fish complete commands.
func writeFish(w io.Writer, m compModel) {
	fmt.Fprintf(w, "# fish completion for %s; install it with: %s completion fish > ~/.config/fish/completions/%s.fish\n", Name, Name, Name)
	fmt.Fprintf(w, "complete -c %s -f\n", Name)
	for _, f := range m.globals {
		fmt.Fprintf(w, "complete -c %s %s\n", Name, fishFlag(f))
	}
	for _, c := range m.cmds {
		fmt.Fprintf(w, "complete -c %s -n __fish_use_subcommand -a %s -d %s\n", Name, c.name, fishQuote(c.help))
	}
	for _, c := range m.cmds {
		cond := "'__fish_seen_subcommand_from " + c.name + "'"
		for _, f := range c.flags {
			fmt.Fprintf(w, "complete -c %s -n %s %s\n", Name, cond, fishFlag(f))
		}
		for _, a := range c.args {
			switch {
			case len(a) == 1 && a[0] == "files":
				fmt.Fprintf(w, "complete -c %s -n %s -F\n", Name, cond)
			case len(a) == 1 && a[0] == "jobs":
				fmt.Fprintf(w, "complete -c %s -n %s -a '(%s __complete jobs 2>/dev/null)' -d 'job id'\n", Name, cond, Name)
			case len(a) > 0:
				fmt.Fprintf(w, "complete -c %s -n %s -a %s\n", Name, cond, fishQuote(strings.Join(a, " ")))
			}
		}
	}
}

// CompleteCmd prints completion candidates the scripts ask for: job ids
// (active ones first, then the newest finished) or card numbers. It is
// hidden, and prints nothing when queued cannot be reached.
type CompleteCmd struct {
	What string `arg:"" enum:"jobs,cards" help:"What to list: ${enum}."`
}

// Run prints one candidate per line.
func (c *CompleteCmd) Run(a *App) error {
	a.quiet = true
	cl, err := a.connect()
	if err != nil {
		return nil
	}
	if c.What == "cards" {
		st, err := cl.Status(a.ctx)
		if err != nil {
			return nil
		}
		for _, cs := range st.Cards {
			fmt.Fprintln(a.Out, cs.DeviceID)
		}
		return nil
	}
	jobs, err := cl.List(a.ctx, api.ListQuery{Limit: 100})
	if err != nil {
		return nil
	}
	for _, j := range jobs {
		fmt.Fprintln(a.Out, j.ID)
	}
	return nil
}
