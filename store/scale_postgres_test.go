package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/store"
)

// pgBacklog makes a schema of its own on the test server with session 21's
// schema and n Pending messages; open opens another connection to it.
func pgBacklog(t *testing.T, n int) (setup *store.DB, open func() *store.DB) {
	t.Helper()
	setup, open, _ = pgBacklogOf(t, store.Backlog{Messages: n, First: benchStart, Spacing: time.Millisecond, PayloadBytes: 256})
	return setup, open
}

// pgBacklogOf is [pgBacklog] seeded with b, and the schema's name.
func pgBacklogOf(t *testing.T, b store.Backlog) (setup *store.DB, open func() *store.DB, schema string) {
	t.Helper()
	url := pgtest.URL(t)
	ctx := context.Background()
	var r [6]byte
	_, _ = rand.Read(r[:])
	schema = "outboxlab_storetest_" + hex.EncodeToString(r[:])
	if err := store.CreateSchema(ctx, url, schema, store.Config{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.DropSchema(context.Background(), url, schema, store.Config{}) })
	open = func() *store.DB {
		db, err := store.OpenPostgres(ctx, url, schema, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	setup = open()
	if err := setup.Migrate(ctx, store.PaymentsOutbox, store.OutboxLeasing, store.OutboxFencing, store.ClaimsAtScale); err != nil {
		t.Fatal(err)
	}
	if err := store.SeedBacklog(ctx, setup, b); err != nil {
		t.Fatal(err)
	}
	return setup, open, schema
}

// TestPostgresDrainKeepsItsPages: a lesson's backlog, seeded with room for
// the row versions a drain writes, keeps its pages through a drain of two
// workers while another session's open transaction keeps every old version
// from being pruned, so the planner, which scales its statistics by the
// table's pages, keeps its plans. Seeded full (as the bench seeds), the
// same drain grows the table: that growth switched a 50-message drain's
// plans mid-drain on a busy server.
func TestPostgresDrainKeepsItsPages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		room  bool
		grows bool
	}{
		{"room for versions", true, false},
		{"seeded full", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			setup, open, schema := pgBacklogOf(t, store.Backlog{Messages: 50, First: benchStart, Spacing: time.Second,
				PayloadBytes: 256, RoomForVersions: tc.room})
			size := func() int64 {
				got := pgtest.Strings(t, pgtest.URL(t), "SELECT pg_relation_size(to_regclass($1))::text", schema+".outboxmessages")
				n, err := strconv.ParseInt(got[0], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			// An open snapshot on the server: no version the drain leaves
			// behind can be pruned while it lives.
			release := pgtest.HoldSnapshot(t, pgtest.URL(t))
			defer release()
			before := size()
			var wg sync.WaitGroup
			for w := range 2 {
				cl := newClaimer(t, open(), fmt.Sprintf("w%d", w+1), store.IndexedScale)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						b, err := cl.Claim(ctx, benchStart, time.Hour, 1)
						if err != nil || len(b.Messages) == 0 {
							return
						}
						if _, err := cl.Finalize(ctx, b.Messages, benchStart); err != nil {
							return
						}
					}
				}()
			}
			wg.Wait()
			if n, err := setup.Count(ctx, store.CountUnprocessed.SQL); err != nil || n != 0 {
				t.Fatalf("unprocessed: %d, %v", n, err)
			}
			after := size()
			t.Logf("%d to %d bytes", before, after)
			if grew := after > before; grew != tc.grows {
				t.Errorf("the table went from %d to %d bytes over the drain; want growth %v", before, after, tc.grows)
			}
		})
	}
}

// TestPostgresClaimsNeverRace: on PostgreSQL, four workers each on its own
// connection drain a backlog with every claim design at batch 1 and 8;
// every message is claimed once (its token is 1) and finalized.
func TestPostgresClaimsNeverRace(t *testing.T) {
	for _, s := range []store.ScaleSQL{store.LessonScale, store.IndexedScale, store.SkipLockedScale} {
		for _, batch := range []int{1, 8} {
			t.Run(fmt.Sprintf("%s/batch%d", s.Name, batch), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				setup, open := pgBacklog(t, 120)
				var wg sync.WaitGroup
				errs := make(chan error, 4)
				for w := range 4 {
					cl := newClaimer(t, open(), fmt.Sprintf("w%d", w+1), s)
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							b, err := cl.Claim(ctx, benchStart, time.Hour, batch)
							if err != nil || len(b.Messages) == 0 {
								errs <- err
								return
							}
							if f, err := cl.Finalize(ctx, b.Messages, benchStart); err != nil || len(f.Rejected) != 0 {
								errs <- errors.Join(err, errors.New("a finalize was refused"))
								return
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Fatal(err)
					}
				}
				if n, err := setup.Count(ctx, store.CountReclaims.SQL); err != nil || n != 0 {
					t.Fatalf("claims beyond the first: %d, %v", n, err)
				}
				if n, err := setup.Count(ctx, store.CountUnprocessed.SQL); err != nil || n != 0 {
					t.Fatalf("unprocessed: %d, %v", n, err)
				}
			})
		}
	}
}

// TestPostgresSchemaRowReads: after a connection flushes its statistics,
// the schema's row count includes its claim; the lesson claim reads more
// rows from a larger table, the indexed one does not; and the plans show
// the scan and the index walk.
func TestPostgresSchemaRowReads(t *testing.T) {
	ctx := context.Background()
	rowsFor := func(s store.ScaleSQL, n int) int64 {
		setup, open := pgBacklog(t, n)
		db := open()
		cl := newClaimer(t, db, "w", s)
		if err := setup.FlushStats(ctx); err != nil {
			t.Fatal(err)
		}
		before, err := setup.SchemaRowReads(ctx)
		if err != nil {
			t.Fatal(err)
		}
		claimN(t, cl, benchStart, time.Minute, 1, 1)
		if err := db.FlushStats(ctx); err != nil {
			t.Fatal(err)
		}
		after, err := setup.SchemaRowReads(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Name == store.IndexedScale.Name && n > 1000 {
			p, err := store.ClaimPlan(ctx, setup, s, benchStart)
			if err != nil || !strings.Contains(strings.Join(p, " / "), "Index Scan using ix_outboxmessages_unprocessed_createdatutc_id") {
				t.Errorf("indexed plan %q, %v", p, err)
			}
		}
		return after - before
	}
	lessonSmall, lessonLarge := rowsFor(store.LessonScale, 100), rowsFor(store.LessonScale, 3000)
	indexedSmall, indexedLarge := rowsFor(store.IndexedScale, 100), rowsFor(store.IndexedScale, 3000)
	if lessonSmall < 100 || lessonLarge < 3000 {
		t.Errorf("lesson claim read %d then %d rows; want at least the whole table each time", lessonSmall, lessonLarge)
	}
	if indexedSmall <= 0 || indexedLarge > indexedSmall+3 {
		t.Errorf("indexed claim read %d then %d rows; want it flat", indexedSmall, indexedLarge)
	}
	if _, err := pgOnlyOnSQLite(t); err == nil {
		t.Error("SchemaRowReads on SQLite: want an error")
	}
}

// pgOnlyOnSQLite calls SchemaRowReads on an SQLite database.
func pgOnlyOnSQLite(t *testing.T) (int64, error) {
	db, _ := openBacklog(t, 1)
	return db.SchemaRowReads(context.Background())
}
