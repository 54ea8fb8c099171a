package store

import (
	"fmt"
	"reflect"
)

// Swap returns set, a lesson's statement set (a struct of [Stmt] fields,
// nested sets and slices of sets allowed), with each mistake in place of
// the lesson statement it names as Replaces, wherever set holds that
// statement: a variant is the lesson's set with its mistakes swapped in.
// It is an error for a mistake to name no statement set holds, or to
// replace none.
func Swap[T any](set T, mistakes ...Stmt) (T, error) {
	v := reflect.ValueOf(&set).Elem()
	for _, m := range mistakes {
		if m.Replaces == nil {
			return set, fmt.Errorf("store: %q is no mistake: it replaces no lesson statement", m.Name)
		}
		if n := swapIn(v, m); n == 0 {
			return set, fmt.Errorf("store: mistake %q replaces %q, which the statement set %T does not hold",
				m.Name, m.Replaces.Name, set)
		}
	}
	return set, nil
}

var stmtType = reflect.TypeFor[Stmt]()

// swapIn puts m in place of every statement in v it replaces and says how
// many it replaced.
func swapIn(v reflect.Value, m Stmt) int {
	switch {
	case v.Type() == stmtType:
		if v.Interface().(Stmt).Name == m.Replaces.Name {
			v.Set(reflect.ValueOf(m))
			return 1
		}
		return 0
	case v.Kind() == reflect.Interface && !v.IsNil():
		e := reflect.New(v.Elem().Type()).Elem()
		e.Set(v.Elem())
		n := swapIn(e, m)
		v.Set(e)
		return n
	case v.Kind() == reflect.Struct:
		n := 0
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				n += swapIn(v.Field(i), m)
			}
		}
		return n
	case v.Kind() == reflect.Slice:
		if v.Len() > 0 {
			// A slice is shared with the value it was copied from: swap
			// into a copy of its own.
			c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			reflect.Copy(c, v)
			v.Set(c)
		}
		n := 0
		for i := range v.Len() {
			n += swapIn(v.Index(i), m)
		}
		return n
	}
	return 0
}

// Changes lists the mistakes set holds in place of the lesson's
// statements, in the order of its fields, each once: what a variant's
// statement set changed.
func Changes(set any) []Stmt {
	var out []Stmt
	seen := map[string]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch {
		case v.Type() == stmtType:
			if s := v.Interface().(Stmt); s.Replaces != nil && !seen[s.Name] {
				seen[s.Name] = true
				out = append(out, s)
			}
		case v.Kind() == reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case v.Kind() == reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	if set != nil {
		walk(reflect.ValueOf(set))
	}
	return out
}
