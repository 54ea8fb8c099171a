package challenge

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/outboxlab/outboxlab/relayproto"
)

// stderrTail is how much of a program's stderr a report keeps: its last
// bytes, enough for a traceback.
const stderrTail = 4 << 10

// program is one running instance of the user's relay: a shell command in
// a process group of its own, its stdout read line by line as requests,
// its stdin written with replies.
type program struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan programLine
	done  chan struct{} // closed once the process is reaped

	mu     sync.Mutex
	stderr tail
	state  *os.ProcessState
}

// programLine is one request line, or the error that ended the program's
// output.
type programLine struct {
	b   []byte
	err error
}

// errLineTooLong is a request line longer than [relayproto.MaxLine].
var errLineTooLong = fmt.Errorf("wrote a line longer than %d bytes: a request is one short JSON line", relayproto.MaxLine)

// startProgram starts command with sh -c in dir, named name, with env (the
// lab's environment is not passed on: a program learns nothing of the
// run's database from it).
func startProgram(command, dir, name string, env []string) (*program, error) {
	cmd := exec.Command("/bin/sh", "-c", shellLine(command))
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Once the program has exited, what it left holding its pipes (a
	// process that left its group) is cut off after this long, so the
	// lab never waits on it.
	cmd.WaitDelay = time.Second
	p := &program{name: name, cmd: cmd, lines: make(chan programLine, 1), done: make(chan struct{})}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// The lab owns stdout's read end, so Wait never closes it under an
	// unread line: read reads to the end of what the program wrote.
	stdout, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = pw
	cmd.Stderr = &p.stderr
	err = cmd.Start()
	pw.Close()
	if err != nil {
		stdout.Close()
		return nil, fmt.Errorf("start %s: %w", command, err)
	}
	p.stdin = stdin
	go p.read(stdout)
	go p.reap(stdout)
	return p, nil
}

// reap waits for the program to exit; a process that left its group and
// still holds stdout open then has a second before read stops waiting.
func (p *program) reap(stdout *os.File) {
	_ = p.cmd.Wait() // its error is the exit status, read from ProcessState
	p.mu.Lock()
	p.state = p.cmd.ProcessState
	p.mu.Unlock()
	_ = stdout.SetReadDeadline(time.Now().Add(time.Second))
	close(p.done)
}

// read hands over stdout's lines until it ends.
func (p *program) read(stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		b, err := readLine(r)
		if err != nil {
			// Stop reading: a flood is not drained, the process group is
			// killed by whoever reads the error.
			p.lines <- programLine{err: err}
			break
		}
		p.lines <- programLine{b: b}
	}
	close(p.lines)
	if c, ok := stdout.(io.Closer); ok {
		c.Close()
	}
}

// shellLine is command as sh runs it: a simple command (no operator,
// redirection, expansion or leading variable assignment) is exec'd, so
// the process the lab watches, signals and reports the exit of is the
// user's program, not a shell around it (dash does not exec the last
// command itself).
func shellLine(command string) string {
	fields := strings.Fields(command)
	if len(fields) == 0 || strings.Contains(fields[0], "=") || shellWords[fields[0]] || strings.ContainsAny(command, ";&|<>()$`\\\n*?[]{}~") {
		return command
	}
	return "exec " + command
}

// shellWords are first words exec must not precede: sh's reserved words
// and builtins.
var shellWords = map[string]bool{"exec": true, "command": true, "!": true, "cd": true, "export": true, "set": true,
	"if": true, "for": true, "while": true, "until": true, "case": true, "eval": true, ".": true}

// readLine reads one line of at most relayproto.MaxLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > relayproto.MaxLine {
			return nil, errLineTooLong
		}
		switch {
		case err == nil:
			return bytes.TrimRight(line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case len(line) > 0 && err == io.EOF:
			return bytes.TrimRight(line, "\r\n"), nil
		default:
			return nil, err
		}
	}
}

// errNotReading is a reply the program did not read within the bound.
var errNotReading = errors.New("did not read the lab's reply")

// reply writes one reply line; a program that has gone makes it fail,
// and one that does not read it within idle is errNotReading (a full
// pipe would otherwise block the lab for good).
func (p *program) reply(b []byte, idle time.Duration) error {
	written := make(chan error, 1)
	go func() {
		_, err := p.stdin.Write(append(b, '\n'))
		written <- err // a write still blocked ends when kill closes stdin
	}()
	select {
	case err := <-written:
		return err
	case <-time.After(idle):
		return errNotReading
	}
}

// signal sends sig to the program's whole process group, which outlives
// its leader while any member is left (Linux reuses no id of a living
// group).
func (p *program) signal(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// kill kills the process group and waits for the program to be reaped.
func (p *program) kill() {
	_ = p.signal(syscall.SIGKILL)
	_ = p.stdin.Close()
	go func() {
		for range p.lines { // what it wrote before it died goes unread
		}
	}()
	<-p.done
}

// exited says how the program ended, "" while it runs.
func (p *program) exited() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		return ""
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + ws.Signal().String()
	}
	return fmt.Sprintf("exited with status %d", p.state.ExitCode())
}

// stderrText is the last of what the program wrote to stderr.
func (p *program) stderrText() string { return p.stderr.String() }

// tail keeps the last stderrTail bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - stderrTail; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(string(t.buf), "?")
}

// programEnv is the environment a program runs with: the lab's own,
// without anything that names a database or the lab's settings, and the
// instance's name and the challenge's.
func programEnv(instance, challenge string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "OUTBOXLAB_") || strings.HasPrefix(name, "PG") || strings.Contains(name, "DATABASE") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "OUTBOXLAB_INSTANCE="+instance, "OUTBOXLAB_CHALLENGE="+challenge)
}
