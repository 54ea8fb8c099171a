package store

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// SweptGrade is what a sweep removed of one grade whose process is gone
// (or tried to: Err says what failed).
type SweptGrade struct {
	ID       string   // the grade's id, the suffix of its objects' names
	Role     string   // its role, "" when it had none left
	Database string   // its database, "" when it had none left
	Schemas  []string // schemas of older outboxlab versions, in the --db login's database, granted to the role
	Err      error
}

// Statements of the sweep.
var (
	graderObjectsSQL = audit("lab: the grades' roles and databases on the server", `SELECT rolname FROM pg_roles WHERE rolname LIKE 'outboxlab\_grader\_%'
UNION ALL
SELECT datname FROM pg_database WHERE datname LIKE 'outboxlab\_grade\_%'
  AND coalesce(shobj_description(oid, 'pg_database'), '') NOT LIKE 'outboxlab: kept by --keep-db%'`)
	graderSchemasSQL = audit("lab: schemas granted to a grade's role (as outboxlab made them before each grade had a database)",
		`SELECT n.nspname FROM pg_namespace n, aclexplode(n.nspacl) a JOIN pg_roles r ON r.oid = a.grantee
WHERE r.rolname = $1 AND n.nspname LIKE 'outboxlab\_%' GROUP BY n.nspname ORDER BY n.nspname`)
)

// SweepGraders removes, on the server at adminDSN, the roles and
// databases of grades whose process is gone: a grade killed with SIGKILL
// could not drop them. A grade holds its advisory lock (see [GraderRole])
// from before it makes its objects until after it drops them, and the
// lock dies with its connection; so the sweep removes a grade's objects
// only when no session holds that lock in any database, and while it
// holds it itself, and never those of a grade still running. It also drops the schemas older outboxlab
// versions made for a role, in adminDSN's database. A database kept by
// run --keep-db stays. The sweep tells what it removed; err is set only
// when it could not look at all.
func SweepGraders(ctx context.Context, adminDSN string) ([]SweptGrade, error) {
	db, err := OpenPostgres(ctx, adminDSN, "", Config{})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	names, err := strings1(ctx, db, graderObjectsSQL.SQL)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", graderObjectsSQL.Name, err)
	}
	ids := map[string]*SweptGrade{}
	for _, n := range names {
		id, isRole := strings.CutPrefix(n, graderRolePrefix)
		if !isRole {
			id = strings.TrimPrefix(n, graderDatabasePrefix)
		}
		if b, err := hex.DecodeString(id); err != nil || len(b) != 4 {
			continue // not a name outboxlab gives
		}
		g := ids[id]
		if g == nil {
			g = &SweptGrade{ID: id}
			ids[id] = g
		}
		if isRole {
			g.Role = n
		} else {
			g.Database = n
		}
	}
	pc, err := postgresConfig(adminDSN, "")
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, unreachable(adminDSN, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var swept []SweptGrade
	for _, g := range ids {
		var id [4]byte
		hex.Decode(id[:], []byte(g.ID))
		var free bool
		if err := conn.QueryRow(ctx, graderLockSQL.SQL, graderLockSpace, lockKey(id), int64(uint32(lockKey(id)))).Scan(&free); err != nil {
			return swept, fmt.Errorf("store: %s: %w", graderLockSQL.Name, err)
		}
		if !free {
			continue // its grade is running
		}
		// Another sweep may have removed some of it since the list.
		if g.Role != "" && !roleStillThere(ctx, db, g.Role) {
			g.Role = ""
		}
		if g.Database != "" && !databaseStillThere(ctx, db, g.Database) {
			g.Database = ""
		}
		if g.Role == "" && g.Database == "" {
			if _, err := conn.Exec(ctx, graderUnlockSQL.SQL, graderLockSpace, lockKey(id)); err != nil {
				return swept, fmt.Errorf("store: %s: %w", graderUnlockSQL.Name, err)
			}
			continue
		}
		g.Err = sweepGrade(ctx, db, g)
		if _, err := conn.Exec(ctx, graderUnlockSQL.SQL, graderLockSpace, lockKey(id)); err != nil {
			g.Err = errors.Join(g.Err, err)
		}
		swept = append(swept, *g)
	}
	sort.Slice(swept, func(i, j int) bool { return swept[i].ID < swept[j].ID })
	return swept, nil
}

func roleStillThere(ctx context.Context, db *DB, name string) bool {
	ok, err := roleExists(ctx, db, name)
	return ok || err != nil // unsure: try, and say what failed
}

func databaseStillThere(ctx context.Context, db *DB, name string) bool {
	n, err := db.Count(ctx, "SELECT count(*) FROM pg_database WHERE datname = ?", name)
	return n == 1 || err != nil
}

// sweepGrade drops what a gone grade left: its database, the schemas of
// an older version granted to its role, then the role.
func sweepGrade(ctx context.Context, db *DB, g *SweptGrade) error {
	var errs []error
	if g.Database != "" {
		if _, err := db.sql.ExecContext(ctx, fmt.Sprintf(dropGradeDatabaseSQL.SQL, pgx.Identifier{g.Database}.Sanitize())); err != nil {
			errs = append(errs, fmt.Errorf("store: %s %s: %w", dropGradeDatabaseSQL.Name, g.Database, err))
		}
	}
	if g.Role == "" {
		return errors.Join(errs...)
	}
	schemas, err := strings1(ctx, db, graderSchemasSQL.SQL, g.Role)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("store: %s: %w", graderSchemasSQL.Name, err))...)
	}
	for _, s := range schemas {
		if _, err := db.sql.ExecContext(ctx, fmt.Sprintf(dropSchemaSQL.SQL, pgx.Identifier{s}.Sanitize())); err != nil {
			errs = append(errs, fmt.Errorf("store: %s %s: %w", dropSchemaSQL.Name, s, err))
			continue
		}
		g.Schemas = append(g.Schemas, s)
	}
	return errors.Join(append(errs, dropRole(ctx, db, g.Role, true))...)
}
