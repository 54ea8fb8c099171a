package scenarios

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"testing"
)

// frameworkFiles are the files of package scenarios that every lesson may
// use: the Scenario type and its execution, the registry, and the helpers
// that turn figures into checks. Every other non-test file is one lesson.
var frameworkFiles = map[string]bool{"scenario.go": true, "registry.go": true, "lesson.go": true}

// TestLessonsAreSiblings asserts that no lesson file uses a name another
// lesson file declares: what two lessons share belongs to package cast or
// to the framework files, so a lesson reads in one file.
func TestLessonsAreSiblings(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, err := conf.Check("github.com/outboxlab/outboxlab/scenarios", fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || obj.Parent() != pkg.Scope() {
			continue // not a package-level name of this package
		}
		user := filepath.Base(fset.Position(id.Pos()).Filename)
		owner := filepath.Base(fset.Position(obj.Pos()).Filename)
		if user == owner || frameworkFiles[user] || frameworkFiles[owner] {
			continue
		}
		msg := user + " uses " + obj.Name() + ", declared in " + owner
		if !seen[msg] {
			seen[msg] = true
			t.Error(msg)
		}
	}
}
