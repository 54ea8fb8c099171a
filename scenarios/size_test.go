package scenarios

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A lesson is a folder below this one, a package of its own: what two
// lessons share lives in package lesson (what a lesson is and how a run is
// framed) or package cast (the actors), never in another lesson's folder.
// Each file reads in one sitting, and each folder in one evening.
const (
	maxLessonFileLines   = 600  // a lesson that outgrows it moves a stage into a file of its own
	maxLessonFolderLines = 1500 // a lesson's non-test code
	module               = "github.com/outboxlab/outboxlab/"
)

// lessonFolders reads every lesson folder's non-test files: folder ->
// file name -> source.
func lessonFolders(t *testing.T) map[string]map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	folders := map[string]map[string][]byte{}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "testdata" {
			continue
		}
		files, err := filepath.Glob(filepath.Join(e.Name(), "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		folders[e.Name()] = map[string][]byte{}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			if folders[e.Name()][filepath.Base(f)], err = os.ReadFile(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	return folders
}

// TestLessonFilesStayReadable: no non-test file of a lesson, of the
// registry or of package lesson is longer than maxLessonFileLines, and no
// lesson folder's non-test code longer than maxLessonFolderLines.
func TestLessonFilesStayReadable(t *testing.T) {
	folders := lessonFolders(t)
	if len(folders) == 0 {
		t.Fatal("no lesson folder found")
	}
	// The registry's files and the framing's are held to the file limit too.
	for _, pattern := range []string{"*.go", filepath.Join("..", "lesson", "*.go")} {
		paths, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			src, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(src, []byte("\n")); n > maxLessonFileLines && !strings.HasSuffix(p, "_test.go") {
				t.Errorf("%s has %d lines, more than %d: split it", p, n, maxLessonFileLines)
			}
		}
	}
	for folder, files := range folders {
		total := 0
		for f, src := range files {
			n := bytes.Count(src, []byte("\n"))
			total += n
			if n > maxLessonFileLines {
				t.Errorf("%s/%s has %d lines, more than %d: move a stage into a file of its own", folder, f, n, maxLessonFileLines)
			}
		}
		if total > maxLessonFolderLines {
			t.Errorf("%s holds %d lines of code, more than %d: move what two lessons share to package cast or lesson", folder, total, maxLessonFolderLines)
		}
	}
}

// TestLessonFoldersAreTheRegistry: every folder below this one is a lesson
// package whose Lesson the registry lists, and the registry lists nothing
// else; no lesson imports another lesson's folder (or the registry), so a
// lesson reads in its own folder and a copied folder stands alone.
func TestLessonFoldersAreTheRegistry(t *testing.T) {
	fset := token.NewFileSet()
	reg, err := parser.ParseFile(fset, "registry.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, imp := range reg.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if folder, ok := strings.CutPrefix(p, module+"scenarios/"); ok {
			registered[folder] = true
		}
	}
	folders := lessonFolders(t)
	if len(registered) != len(All()) {
		t.Errorf("registry.go imports %d lesson folders and lists %d lessons", len(registered), len(All()))
	}
	for folder, files := range folders {
		if !registered[folder] {
			t.Errorf("folder %s is no lesson the registry lists: add its Lesson to registry.go", folder)
		}
		declares := false
		for name, src := range files {
			f, err := parser.ParseFile(fset, name, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if other, ok := strings.CutPrefix(p, module+"scenarios/"); ok {
					t.Errorf("%s/%s imports the lesson %s: what two lessons share belongs to package cast or lesson", folder, name, other)
				}
				if p == module+"scenarios" {
					t.Errorf("%s/%s imports the registry", folder, name)
				}
			}
			if f.Scope.Lookup("Lesson") != nil {
				declares = true
			}
		}
		if !declares {
			t.Errorf("folder %s declares no Lesson", folder)
		}
	}
	for folder := range registered {
		if folders[folder] == nil {
			t.Errorf("registry.go imports %s, which is no folder here", folder)
		}
	}
}

// packageSources reads every lesson folder's non-test files, by path.
func packageSources(t *testing.T) map[string][]byte {
	t.Helper()
	sources := map[string][]byte{}
	for folder, files := range lessonFolders(t) {
		for name, src := range files {
			sources[folder+"/"+name] = src
		}
	}
	return sources
}

// TestNamedTestsExist: every test a lesson names on its value (the test
// that breaks a check no swap can, the test that runs it with child
// processes) is a test function of a lesson folder or of the registry.
func TestNamedTestsExist(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob(filepath.Join("*", "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range append(files, more...) {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				tests[fn.Name.Name] = true
			}
		}
	}
	for _, sc := range All() {
		named := []string{sc.Processes.Elsewhere}
		for _, test := range sc.BrokenByTest {
			named = append(named, test)
		}
		for _, test := range named {
			if test != "" && !tests[test] {
				t.Errorf("%s names the test %s, which no test file holds", sc.Name, test)
			}
		}
	}
}
