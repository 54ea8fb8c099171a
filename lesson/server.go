package lesson

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/store"
)

// serverSchemas are the schemas one run creates on a PostgreSQL server: the
// run's own (for its main database file) and one beside it for each extra
// database file a lesson opens, named outboxlab_<scenario>_<random>[_<n>].
//
// A run with an engineer's claim file is confined: before its first schema
// the login in --db creates a throwaway login role and a database of its
// own for it ([store.GraderRole]), PostgreSQL judges the file there
// ([store.GraderRole.CheckSlotFile]), the run's schemas are made in that
// database with USAGE and CREATE for the role and nothing else, and every
// connection of the run, a child process's too, logs in as that role to
// that database; the role and the database are dropped, on every path.
//
// A run that starts a user's program (a relay challenge's) is confined the
// same way, with the roles the other way round: the lab's connections log
// in as the login in --db, in the role's database, and only the program's
// log in as the role, which may use the challenge's tables and nothing
// else ([store.GraderRole.GrantProgram]), the lab's audit least of all.
type serverSchemas struct {
	url, main, base string
	file            *store.SlotFile       // the run's slot file: connect as role, in its database
	program         *store.ProgramSandbox // the run's program: it alone connects as role
	role            *store.GraderRole     // with a file or a program, once the first schema exists
	server          *store.Server         // the run's connections: as role when a file confines them
	programServer   *store.Server         // with a program, its connections, as role
	granted         map[string]bool       // with a program, the schemas whose tables it was granted
	keep            bool                  // --keep-db: the run's database stays

	mu      sync.Mutex
	byPath  map[string]string // database file -> schema
	created []string          // schemas in creation order, each with the file it stands for in parentheses unless the main one
	extras  int               // schemas made for extra database files
}

// maxSchemaName is PostgreSQL's identifier limit (NAMEDATALEN - 1).
const maxSchemaName = 63

// newServerSchemas names a run's schemas on the server at url; with a
// slot file its connections log in as a grader role, to a database of
// its own, made on first use.
func newServerSchemas(url, scenario, mainPath string, file *store.SlotFile, program *store.ProgramSandbox) *serverSchemas {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("-", "_", ".", "_").Replace(scenario)
	base := "outboxlab_" + name
	if limit := maxSchemaName - 1 - 8 - 4; len(base) > limit { // room for _<random> and _<n>
		base = base[:limit]
	}
	base += "_" + hex.EncodeToString(b[:])
	return &serverSchemas{url: url, main: mainPath, base: base, file: file, program: program, byPath: map[string]string{},
		server: store.NewServer(url), granted: map[string]bool{}}
}

// schemaFor returns the schema that stands for the database file path,
// creating it on first use.
func (s *serverSchemas) schemaFor(ctx context.Context, path string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if schema, ok := s.byPath[path]; ok {
		return schema, nil
	}
	schema := s.base
	if path != s.main {
		s.extras++
		schema = fmt.Sprintf("%s_%d", s.base, s.extras)
	}
	admin := s.url
	if s.file != nil || s.program != nil {
		if s.role == nil {
			role, err := store.CreateGraderRole(ctx, s.url)
			if err != nil {
				return "", err
			}
			s.role = role
			if s.program != nil {
				s.server.Close()
				s.server, s.programServer = store.NewServer(role.AdminURL()), store.NewFreshServer(role.URL())
			} else {
				s.server.Close()
				s.server = store.NewServer(role.URL())
				if err := role.CheckSlotFile(ctx, *s.file); err != nil {
					return "", err
				}
			}
		}
		admin = s.role.AdminURL()
	}
	if err := store.CreateSchema(ctx, admin, schema, store.Config{}); err != nil {
		return "", err
	}
	s.byPath[path] = schema
	if s.file != nil {
		if err := s.role.GrantSchema(ctx, schema); err != nil {
			return "", err
		}
	}
	if path == s.main {
		s.created = append(s.created, schema)
	} else {
		s.created = append(s.created, schema+" (for "+filepath.Base(path)+")")
	}
	return schema, nil
}

// schemaOf is the schema that stands for path, once created.
func (s *serverSchemas) schemaOf(path string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	schema, ok := s.byPath[path]
	return schema, ok
}

// describe is the report's Database line: the server without its password,
// and the run's schemas, with the file each extra one stands for; for a
// confined run, the role its claim file ran as and that role's rights.
func (s *serverSchemas) describe() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := store.RedactURL(s.url) + ", schema " + strings.Join(s.created, ", ")
	if s.role != nil {
		d = store.RedactURL(s.role.AdminURL()) + ", schema " + strings.Join(s.created, ", ")
		schemas := make([]string, 0, len(s.byPath))
		for _, schema := range s.byPath {
			schemas = append(schemas, schema)
		}
		sort.Strings(schemas)
		noun := "schema"
		if len(schemas) > 1 {
			noun = "schemas"
		}
		if s.program != nil {
			d += fmt.Sprintf("; your program's statements ran as login role %s, rights: USAGE on %s %s, SELECT, INSERT, UPDATE, DELETE "+
				"on its tables %s only, in database %s, its own %s",
				s.role.Name, noun, strings.Join(schemas, ", "), strings.Join(s.program.Tables, ", "), s.role.Database, s.afterRun())
		} else {
			d += fmt.Sprintf("; claim file ran as login role %s, rights: USAGE, CREATE on %s %s only, in database %s, its own %s",
				s.role.Name, noun, strings.Join(schemas, ", "), s.role.Database, s.afterRun())
		}
	}
	return d
}

// afterRun says what becomes of the run's role and database.
func (s *serverSchemas) afterRun() string {
	if s.keep {
		return "(the role is dropped after the run; --keep-db keeps the database)"
	}
	return "(the role and the database are dropped after the run)"
}

// connURL is the URL the run's connections use: the login in --db's, or
// for a confined run its role's (with the role's password: never print it).
func (s *serverSchemas) connURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.role != nil {
		return s.role.URL()
	}
	return s.url
}

// open opens one application instance's connection to the schema that
// stands for path.
func (s *serverSchemas) open(ctx context.Context, path string, cfg store.Config) (*store.DB, error) {
	schema, err := s.schemaFor(ctx, path)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	server := s.server
	s.mu.Unlock()
	return server.Open(ctx, schema, cfg)
}

// openProgram opens a connection of the run's program to the schema that
// stands for path, as the run's role, granting the role the program's
// tables there first (they exist once the lab's world has migrated it).
func (s *serverSchemas) openProgram(ctx context.Context, path string, cfg store.Config) (*store.DB, error) {
	schema, err := s.schemaFor(ctx, path)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.program == nil || s.role == nil {
		return nil, fmt.Errorf("lesson: the run was not made for a program: a program's connection has no role to log in as")
	}
	if !s.granted[schema] {
		if err := s.role.GrantProgram(ctx, schema, s.program.Tables); err != nil {
			return nil, err
		}
		s.granted[schema] = true
	}
	return s.programServer.Open(ctx, schema, cfg)
}

// serverCleanupTimeout bounds dropping a run's schemas and role, which happens
// after the run's own context may have ended.
const serverCleanupTimeout = 30 * time.Second

// drop closes the run's connections and removes its schemas unless keep,
// and a confined run's role in any case, with its database unless keep
// (with keep, the role's tables in the kept database pass to the login in
// --db first); a failure goes to warn.
func (s *serverSchemas) drop(keep bool, warn func(error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.server.Close()
	if s.programServer != nil {
		s.programServer.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), serverCleanupTimeout)
	defer cancel()
	report := func(err error) {
		if err != nil && warn != nil {
			warn(err)
		}
	}
	if s.role != nil {
		// A killed child's session may still hold locks on the schema;
		// the schemas are in the role's database, which goes with it.
		report(s.role.Disconnect(ctx))
		report(s.role.Drop(ctx, keep))
		return
	}
	if !keep {
		for _, schema := range s.byPath {
			report(store.DropSchema(ctx, s.url, schema, store.Config{}))
		}
	}
}
