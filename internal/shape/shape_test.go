package shape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the import path of the module these packages belong to.
const module = "github.com/ttkit/ttkit"

// maxMethods is the most methods a type may have, those of the types it
// embeds included: a type past it does two jobs and is two types.
const maxMethods = 25

// skipDirs are not the module's own code: build output, fixtures.
var skipDirs = map[string]bool{"build": true, "bin": true, "testdata": true, ".git": true, "node_modules": true}

// TestShape_NoTypeHasTooManyMethods counts, in every package of the
// module (test files left out), the methods each type declares, plus
// those of the types of its package it embeds: none has more than
// maxMethods.
func TestShape_NoTypeHasTooManyMethods(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if skipDirs[d.Name()] {
			return filepath.SkipDir
		}
		counts, embeds := map[string]int{}, map[string][]string{}
		for _, f := range parseDir(t, path) {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Recv != nil && len(d.Recv.List) == 1 {
						counts[receiverName(d.Recv.List[0].Type)]++
					}
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						ts, ok := spec.(*ast.TypeSpec)
						if !ok {
							continue
						}
						if st, ok := ts.Type.(*ast.StructType); ok {
							for _, field := range st.Fields.List {
								if len(field.Names) == 0 {
									embeds[ts.Name.Name] = append(embeds[ts.Name.Name], receiverName(field.Type))
								}
							}
						}
					}
				}
			}
		}
		rel, _ := filepath.Rel(root, path)
		for name, n := range counts {
			for _, e := range embeds[name] {
				n += counts[e]
			}
			if n > maxMethods {
				t.Errorf("type %s in %s has %d methods (its embedded types' included), more than %d: split it into parts with one job each", name, rel, n, maxMethods)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// receiverName is the type a method's receiver names: T of T, *T, T[P]
// or *T[P].
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

// TestShape_NoBackArrow: queued/config reads the settings (and imports
// api, the wire); the wire, its server and the scheduler are configured
// by what config read, through their options, and never depend on it,
// directly or through another package of this module.
func TestShape_NoBackArrow(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	forbidden := module + "/queued/config"
	for _, pkg := range []string{module + "/queued/api", module + "/queued/server", module + "/queued/scheduler",
		module + "/queued/runner", module + "/queued/store"} {
		if path, ok := dependsOn(t, root, pkg, forbidden, map[string]bool{}); ok {
			t.Errorf("%s depends on %s: %s", pkg, forbidden, strings.Join(path, " -> "))
		}
	}
}

// dependsOn reports whether pkg imports target, directly or through the
// module's own packages (their non-test files), and the chain of imports
// that leads there.
func dependsOn(t *testing.T, root, pkg, target string, seen map[string]bool) ([]string, bool) {
	if pkg == target {
		return []string{pkg}, true
	}
	if seen[pkg] {
		return nil, false
	}
	seen[pkg] = true
	var imports []string
	for _, f := range parseDir(t, filepath.Join(root, strings.TrimPrefix(pkg, module))) {
		for _, spec := range f.Imports {
			p, _ := strconv.Unquote(spec.Path.Value)
			if strings.HasPrefix(p, module+"/") && !slices.Contains(imports, p) {
				imports = append(imports, p)
			}
		}
	}
	for _, p := range imports {
		if path, ok := dependsOn(t, root, p, target, seen); ok {
			return append([]string{pkg}, path...), true
		}
	}
	return nil, false
}

// parseDir parses the non-test Go files of one directory.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading package directory %s: %v", dir, err)
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing %s: %v", name, err)
		}
		files = append(files, f)
	}
	return files
}

// moduleRoot is the directory of go.mod above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// maxDocLines is the longest page under docs/: a page past it covers two
// subjects and is two pages (issue 33 split the four that were).
const maxDocLines = 500

// TestShape_NoDocPageIsTooLong counts the lines of every page under docs/.
func TestShape_NoDocPageIsTooLong(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob(filepath.Join(moduleRoot(t), "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages under docs/ (%v)", err)
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "\n"); n > maxDocLines {
			t.Errorf("docs/%s has %d lines, over %d: split it by subject", filepath.Base(p), n, maxDocLines)
		}
	}
}
