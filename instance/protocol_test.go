package instance

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// protocols are the child roles' operations: for each role, the variable
// that declares its operations (a struct of [proc.Operation] or [method]
// values), by
// name and value, and the name of the function that serves them.
var protocols = []struct {
	role, opsVar, serve string
	ops                 any
}{
	{checkoutRole, "checkoutOps", "serveCheckout", checkoutOps},
	{outboxRole, "outboxOps", "serveOutbox", outboxOps},
	{relayRole, "relayOps", "serveRelay", relayOps},
	{pipelineRelayRole, "pipelineRelayOps", "servePipelineRelay", pipelineRelayOps},
	{pipelineConsumerRole, "pipelineConsumerOps", "servePipelineConsumer", pipelineConsumerOps},
	{scaleWorkerRole, "scaleWorkerOps", "serveScaleWorker", scaleWorkerOps},
	{batchRelayRole, "batchRelayOps", "serveBatchRelay", batchRelayOps},
	{heartbeatRelayRole, "heartbeatOps", "serveHeartbeatRelay", heartbeatOps},
	{clockRelayRole, "clockRelayOps", "serveClockRelay", clockRelayOps},
}

// TestEveryRoleHasItsOperations: each role the worker serves has one
// entry in protocols, and each role's operations have names, none twice:
// the names are what crosses the pipe.
func TestEveryRoleHasItsOperations(t *testing.T) {
	var listed []string
	for _, p := range protocols {
		listed = append(listed, p.role)
		t.Run(p.role, func(t *testing.T) {
			v := reflect.ValueOf(p.ops)
			seen := map[string]string{}
			for i := range v.NumField() {
				field := v.Type().Field(i).Name
				name := v.Field(i).FieldByName("Name").String()
				if name == "" {
					t.Errorf("%s.%s has no name", p.opsVar, field)
				}
				if other, twice := seen[name]; twice {
					t.Errorf("%s.%s and %s.%s are both %q", p.opsVar, other, p.opsVar, field, name)
				}
				seen[name] = field
			}
		})
	}
	if served := slices.Sorted(maps.Keys(roles)); !slices.Equal(slices.Sorted(slices.Values(listed)), served) {
		t.Errorf("protocols lists the roles %v, the worker serves %v", slices.Sorted(slices.Values(listed)), served)
	}
}

// TestEveryOperationIsCalledAndServed reads the package's source: every
// operation a role declares is handled (X.Op.Handle, or X.Op.serve for a
// [method]) in the role's serve function and called (any other use of
// X.Op) by the lab's side, so a missing handler or an operation nobody
// calls fails here, not in a lesson's run. Every variable declaring operations (named ...Ops) is in
// protocols.
func TestEveryOperationIsCalledAndServed(t *testing.T) {
	src := parsePackage(t)
	declared := src.declaredOps()
	if got, want := slices.Sorted(maps.Keys(declared)), opsVars(); !slices.Equal(got, want) {
		t.Fatalf("the package declares operations in %v, protocols lists %v", got, want)
	}
	served, called := src.uses()
	for _, p := range protocols {
		t.Run(p.role, func(t *testing.T) {
			for _, op := range declared[p.opsVar] {
				name := p.opsVar + "." + op
				switch in := served[name]; {
				case len(in) == 0:
					t.Errorf("%s has no handler", name)
				case len(in) > 1 || in[0] != p.serve:
					t.Errorf("%s is handled in %v, want once in %s", name, in, p.serve)
				}
				if called[name] == 0 {
					t.Errorf("%s is never called", name)
				}
			}
		})
	}
}

// opsVars are the names of the variables in protocols, sorted.
func opsVars() []string {
	var names []string
	for _, p := range protocols {
		names = append(names, p.opsVar)
	}
	slices.Sort(names)
	return names
}

// source is the package's files, tests left out.
type source []*ast.File

// parsePackage parses the package's Go files, tests left out.
func parsePackage(t *testing.T) source {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files source
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// declaredOps are the package-level variables named ...Ops whose type is
// a struct, each with its fields.
func (s source) declaredOps() map[string][]string {
	declared := map[string][]string{}
	for _, f := range s {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasSuffix(n.Name, "Ops") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.CompositeLit)
					if !ok {
						continue
					}
					st, ok := lit.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, field := range st.Fields.List {
						for _, fn := range field.Names {
							declared[n.Name] = append(declared[n.Name], fn.Name)
						}
					}
				}
			}
		}
	}
	return declared
}

// uses finds every use of an operation X.Op, X named ...Ops: where it is
// handled (X.Op.Handle or X.Op.serve), by the function it is in, and how many times it
// is used otherwise (called).
func (s source) uses() (served map[string][]string, called map[string]int) {
	served, called = map[string][]string{}, map[string]int{}
	opOf := func(e ast.Expr) (string, bool) {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok || !strings.HasSuffix(x.Name, "Ops") {
			return "", false
		}
		return x.Name + "." + sel.Sel.Name, true
	}
	for _, f := range s {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if op, ok := opOf(sel.X); ok && (sel.Sel.Name == "Handle" || sel.Sel.Name == "serve") {
					served[op] = append(served[op], fn.Name.Name)
					return false // not a call of X.Op
				}
				if op, ok := opOf(sel); ok {
					called[op]++
				}
				return true
			})
		}
	}
	return served, called
}
