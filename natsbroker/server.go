package natsbroker

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// serverReadyWait bounds how long Start waits for the embedded server to
// accept connections.
const serverReadyWait = 10 * time.Second

// Server is an embedded nats-server with JetStream, running in this
// process, its file store in a folder the caller owns and removes.
type Server struct {
	ns  *server.Server
	dir string
}

// ServerOptions are the embedded server's options beyond its folder.
type ServerOptions struct {
	// Port is the port on 127.0.0.1; 0 lets the system pick one.
	Port int
	// Log receives the server's notices, warnings and errors, one a line;
	// nil logs nothing.
	Log io.Writer
}

// Start starts an embedded nats-server with JetStream on 127.0.0.1 and a
// port the system picks, its file store under dir (created if missing),
// logging nothing. A second process reaches it at [Server.URL].
func Start(dir string) (*Server, error) { return StartWith(dir, ServerOptions{}) }

// StartOnPort is [Start] on a given port (0: the system picks one): a
// server stopped mid-run is started again on its port and its store, and
// the clients connected to it reconnect.
func StartOnPort(dir string, port int) (*Server, error) {
	return StartWith(dir, ServerOptions{Port: port})
}

// StartWith is [Start] with options.
func StartWith(dir string, o ServerOptions) (*Server, error) {
	port := o.Port
	if dir == "" {
		return nil, errors.New("natsbroker: start: no store folder")
	}
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("natsbroker: start: port %d out of range", port)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: "outboxlab",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      o.Log == nil,
		NoSigs:     true,
		// No HTTP monitoring, cluster, gateway or leaf ports.
		HTTPPort: 0,
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsbroker: start the embedded server: %w", err)
	}
	if o.Log != nil {
		ns.SetLogger(&lineLogger{w: o.Log}, false, false)
	}
	ns.Start()
	if !ns.ReadyForConnections(serverReadyWait) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("natsbroker: the embedded server on 127.0.0.1:%d was not ready within %s", port, serverReadyWait)
	}
	return &Server{ns: ns, dir: dir}, nil
}

// URL is where clients reach the server: nats://127.0.0.1:PORT.
func (s *Server) URL() string { return s.ns.ClientURL() }

// Port is the port the server listens on.
func (s *Server) Port() int {
	if addr, ok := s.ns.Addr().(*net.TCPAddr); ok {
		return addr.Port
	}
	_, port, _ := net.SplitHostPort(s.ns.Addr().String())
	n, _ := strconv.Atoi(port)
	return n
}

// Dir is the server's store folder.
func (s *Server) Dir() string { return s.dir }

// Shutdown stops the server and waits until it has stopped.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}

// reconnectWait is how long a client waits between reconnect attempts to
// a stopped server: short, so a restarted server is reached at once.
const reconnectWait = 50 * time.Millisecond

// Connect connects to the NATS server at url (nats://HOST:PORT), the
// embedded one's [Server.URL] or an external one. The connection
// reconnects for ever, every 50 ms, and buffers nothing while
// disconnected, so a publish during an outage fails at once
// ([ErrUnavailable]) instead of being sent late after a reconnect.
func Connect(url string) (*nats.Conn, error) {
	nc, err := nats.Connect(url,
		nats.Name("outboxlab natsbroker"),
		nats.Timeout(2*time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectJitter(0, 0),
		nats.ReconnectBufSize(-1),
	)
	if err != nil {
		return nil, fmt.Errorf("natsbroker: connect to %s: %w: %w", Redacted(url), ErrUnavailable, err)
	}
	return nc, nil
}

// lineLogger writes the server's log lines to w. Fatalf only logs: the
// server, not this logger, decides what a fatal error stops.
type lineLogger struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineLogger) line(level, format string, v []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "nats-server %s: %s\n", level, fmt.Sprintf(format, v...))
}

func (l *lineLogger) Noticef(format string, v ...any) { l.line("notice", format, v) }
func (l *lineLogger) Warnf(format string, v ...any)   { l.line("warning", format, v) }
func (l *lineLogger) Fatalf(format string, v ...any)  { l.line("fatal", format, v) }
func (l *lineLogger) Errorf(format string, v ...any)  { l.line("error", format, v) }
func (l *lineLogger) Debugf(format string, v ...any)  { l.line("debug", format, v) }
func (l *lineLogger) Tracef(format string, v ...any)  { l.line("trace", format, v) }

// ServerVersion is the version of the embedded nats-server.
const ServerVersion = server.VERSION

// Redacted is a server's URL as a report may print it: its user's
// password left out.
func Redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = url.User(u.User.Username())
	return u.String()
}
