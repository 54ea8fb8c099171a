package scenarios

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// emptyImporter imports every package as an empty, complete one.
type emptyImporter struct{}

func (emptyImporter) Import(importPath string) (*types.Package, error) {
	p := types.NewPackage(importPath, path.Base(importPath))
	p.MarkComplete()
	return p, nil
}

// frameworkFiles are the files of package scenarios that every lesson may
// use: the Scenario type and its execution, the registry, the run's
// schemas on a server, the helpers that turn figures into checks, and the
// exercises, which hand out the lessons' statements (and ask the explorer
// whether it runs them).
// Every other non-test file is one lesson; the instances a lesson runs,
// in the lab's process or as child processes, are package instance's.
var frameworkFiles = map[string]bool{"scenario.go": true, "registry.go": true, "lesson.go": true, "server.go": true,
	"exercises.go": true, "exercise_catalogue.go": true}

// TestLessonsAreSiblings asserts that no lesson's files use a name another
// lesson's files declare: what two lessons share belongs to package cast
// or to the framework files, so a lesson reads in its own files (see
// lessonOf).
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
	// Only this package's own names matter, so every import is an empty
	// package: selectors into it stay unresolved (those errors are
	// ignored), while each identifier that names one of this package's
	// declarations is still resolved, in a fraction of a second.
	conf := types.Config{Importer: emptyImporter{}, Error: func(error) {}}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, _ := conf.Check("github.com/outboxlab/outboxlab/scenarios", fset, files, info)
	if len(info.Uses) == 0 {
		t.Fatal("the type checker resolved no identifier")
	}
	seen := map[string]bool{}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || obj.Parent() != pkg.Scope() {
			continue // not a package-level name of this package
		}
		user := filepath.Base(fset.Position(id.Pos()).Filename)
		owner := filepath.Base(fset.Position(obj.Pos()).Filename)
		if lessonOf(user, paths) == lessonOf(owner, paths) || frameworkFiles[user] || frameworkFiles[owner] {
			continue
		}
		msg := user + " uses " + obj.Name() + ", declared in " + owner
		if !seen[msg] {
			seen[msg] = true
			t.Error(msg)
		}
	}
}

// lessonOf is the lesson file a file belongs to: a lesson too long for one
// file (see maxLessonFileLines) keeps its stages in files named after it,
// session21_claims_at_scale_stages.go beside session21_claims_at_scale.go.
// It is the longest proper prefix of file's name, cut at an underscore,
// that names another of files; else file itself.
func lessonOf(file string, files []string) string {
	name := strings.TrimSuffix(file, ".go")
	for i := strings.LastIndex(name, "_"); i > 0; i = strings.LastIndex(name[:i], "_") {
		if lesson := name[:i] + ".go"; slices.Contains(files, lesson) {
			return lesson
		}
	}
	return file
}
