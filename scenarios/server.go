package scenarios

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/outboxlab/outboxlab/store"
)

// serverSchemas are the schemas one run creates on a PostgreSQL server: the
// run's own (for its main database file) and one beside it for each extra
// database file a lesson opens, named outboxlab_<scenario>_<random>[_<n>].
type serverSchemas struct {
	url, main, base string
	server          *store.Server

	mu      sync.Mutex
	byPath  map[string]string // database file -> schema
	created []string          // schemas in creation order, each with the file it stands for in parentheses unless the main one
	extras  int               // schemas made for extra database files
}

// maxSchemaName is PostgreSQL's identifier limit (NAMEDATALEN - 1).
const maxSchemaName = 63

func newServerSchemas(url, scenario, mainPath string) *serverSchemas {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.ReplaceAll(scenario, "-", "_")
	base := "outboxlab_" + name
	if limit := maxSchemaName - 1 - 8 - 4; len(base) > limit { // room for _<random> and _<n>
		base = base[:limit]
	}
	base += "_" + hex.EncodeToString(b[:])
	return &serverSchemas{url: url, main: mainPath, base: base, byPath: map[string]string{}, server: store.NewServer(url)}
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
	if err := store.CreateSchema(ctx, s.url, schema, store.Config{}); err != nil {
		return "", err
	}
	s.byPath[path] = schema
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
// and the run's schemas, with the file each extra one stands for.
func (s *serverSchemas) describe() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return store.RedactURL(s.url) + ", schema " + strings.Join(s.created, ", ")
}

// open opens one application instance's connection to the schema that
// stands for path.
func (s *serverSchemas) open(ctx context.Context, path string, cfg store.Config) (*store.DB, error) {
	schema, err := s.schemaFor(ctx, path)
	if err != nil {
		return nil, err
	}
	return s.server.Open(ctx, schema, cfg)
}

// drop closes the run's connections and removes its schemas unless keep;
// a failure goes to warn.
func (s *serverSchemas) drop(keep bool, warn func(error)) {
	s.server.Close()
	if keep {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, schema := range s.byPath {
		if err := store.DropSchema(context.Background(), s.url, schema, store.Config{}); err != nil && warn != nil {
			warn(err)
		}
	}
}
