package instance

import (
	"context"

	"github.com/outboxlab/outboxlab/proc"
)

// method is an operation of a role whose instance is the same service
// S (its statements on its own connection) in the lab's process and in
// a child, with how S performs it: the in-process instance calls do
// itself, the child's handler calls it for the lab ([method.serve]), so
// the two forms read the operation's arguments the one same way.
type method[S, A, R any] struct {
	proc.Operation[A, R]
	do func(ctx context.Context, s S, args A) (R, error)
}

// newMethod is operation name, performed on S by do.
func newMethod[S, A, R any](name string, do func(ctx context.Context, s S, args A) (R, error)) method[S, A, R] {
	return method[S, A, R]{proc.Operation[A, R]{Name: name}, do}
}

// serve is m's handler in a child whose service is s.
func (m method[S, A, R]) serve(s S) proc.Handler {
	return m.Handle(func(ctx context.Context, args A) (R, error) { return m.do(ctx, s, args) })
}

// runsOn is where an instance's methods run: on its service in the lab's
// process, or in its child process.
type runsOn[S any] struct {
	service S
	child   *child // nil: in the lab's process
}

// perform has the instance on perform m with args, where it runs.
func perform[S, A, R any](ctx context.Context, on runsOn[S], m method[S, A, R], args A) (R, error) {
	if on.child == nil {
		return m.do(ctx, on.service, args)
	}
	return call(ctx, on.child, m.Operation, args)
}
