package shape

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestShape_NoCycleBetweenFolders draws the module as a house of folders:
// a folder imports another when a package in it (or below it) imports a
// package in the other (or below it). Go refuses a cycle between packages
// but not between folders, and the folder is what a reader sees: when
// queued/api/server (now queued/server) imported the scheduler and the scheduler imported
// queued/api, nobody could tell which of the two was the lower layer.
// Folders where one holds the other are not compared (a parent's main
// package importing its children is the normal shape).
func TestShape_NoCycleBetweenFolders(t *testing.T) {
	t.Parallel()
	edges := folderEdges(t, moduleRoot(t))
	var found []string
	for e, why := range edges {
		if e.from > e.to {
			continue // each pair is looked at once, from its smaller name
		}
		if back, ok := edges[folderEdge{from: e.to, to: e.from}]; ok {
			found = append(found, fmt.Sprintf("%s and %s import each other: %s, while %s", e.from, e.to, why, back))
		}
	}
	slices.Sort(found)
	for _, f := range found {
		t.Error(f)
	}
}

// folderEdge is one folder importing another.
type folderEdge struct{ from, to string }

// folderEdges lists, for every import between two of the module's
// packages, the pairs of folders it joins (each package's folder and
// every folder above it, up to the module root), with the import that
// first joined each pair.
func folderEdges(t *testing.T, root string) map[folderEdge]string {
	t.Helper()
	edges := map[folderEdge]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if skipDirs[d.Name()] || (path != root && strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		from, _ := filepath.Rel(root, path)
		for _, f := range parseDir(t, path) {
			for _, spec := range f.Imports {
				p, _ := strconv.Unquote(spec.Path.Value)
				to, ok := strings.CutPrefix(p, module+"/")
				if !ok {
					continue
				}
				for _, a := range folders(filepath.ToSlash(from)) {
					for _, b := range folders(to) {
						if within(a, b) || within(b, a) {
							continue
						}
						e := folderEdge{from: a, to: b}
						if _, seen := edges[e]; !seen {
							edges[e] = filepath.ToSlash(from) + " imports " + to
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return edges
}

// folders is a package's folder and each folder above it: a/b/c, a/b, a.
func folders(pkg string) []string {
	var out []string
	for p := pkg; p != "." && p != ""; p = filepath.ToSlash(filepath.Dir(p)) {
		out = append(out, p)
	}
	return out
}

// within reports whether folder a is b or lies below it.
func within(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/")
}

// maxFileLines is the longest hand-written Go file (tests aside): past
// it a file holds two subjects and is two files.
const maxFileLines = 500

// TestShape_NoFileIsTooLong counts the lines of every non-test,
// non-generated Go file of the module.
func TestShape_NoFileIsTooLong(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[d.Name()] || (path != root && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if generated(b) {
			return nil
		}
		if n := bytes.Count(b, []byte("\n")); n > maxFileLines {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s has %d lines, more than %d: split it by subject", rel, n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// generated reports whether a Go file carries the standard "Code
// generated ... DO NOT EDIT." line before its package clause.
func generated(src []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "package ") {
			return false
		}
		if strings.HasPrefix(line, "// Code generated ") && strings.HasSuffix(line, " DO NOT EDIT.") {
			return true
		}
	}
	return false
}

// TestShape_WireStandsAlone: queued/api is the wire (types, client,
// errors) that the CLI, the server and the scheduler all speak; it sits
// below every one of them and imports no package of the module.
func TestShape_WireStandsAlone(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	for _, f := range parseDir(t, filepath.Join(root, "queued", "api")) {
		for _, spec := range f.Imports {
			if p, _ := strconv.Unquote(spec.Path.Value); strings.HasPrefix(p, module+"/") {
				t.Errorf("queued/api imports %s: the wire must depend on nothing of the module's", p)
			}
		}
	}
}
