package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/reports"
)

// guardPredicates are the texts of the WHERE-clause predicates each guard
// stands for, as the lessons' statements spell them: a refusal names one
// of its guard's predicates, and the statement that ran must hold it. A
// row gone or a write rolled back for its row count names no predicate.
var guardPredicates = map[lab.Refusal][]string{
	lab.RefusedByToken:    {"claim_token = :token", "ClaimToken = "},
	lab.RefusedByOwner:    {"LockedBy = :worker", "locked_by = :"},
	lab.RefusedByStatus:   {"Status = 'Processing'", "delivered = 0"},
	lab.RefusedByLease:    {"lease_until > ", "LockedUntilUtc > "},
	lab.RefusedByDeadline: {":max_processing"},
	lab.RefusedByShorter:  {"lease_until < :proposed"},
	lab.RefusedByReceipt:  {"delivery_count = :receipt", "state = 'in_flight'"},
}

// TestLaneMarksAgreeWithTheRun reads every lesson's and every SQLite
// variant's lanes and page as a reviewer would, each mark against the
// event it came from and each event against the run's ledgers:
//
//   - FENCED (text) and a fence's data-refusal (page) only on a write a
//     newer token refused, and every such write drawn FENCED;
//   - every other refused write drawn REFUSED (or ROLLED BACK), with the
//     guard it read back, whose predicate is in a statement of the run
//     that the page lists for that event (from the statement ledger);
//   - an ack that never reached its peer (a consumer's to the broker, the
//     broker's of a send to the relay: the ledger's row says it was lost)
//     drawn LOST, never as an ack, no other event drawn LOST, and every
//     ack drawn as one changed its row at the broker;
//   - a consumer's effect, dedup or ack never in a row above the delivery
//     it came from, and a delivery never above its offer.
func TestLaneMarksAgreeWithTheRun(t *testing.T) {
	t.Parallel()
	forEachSQLiteRun(t, func(t *testing.T, r *lab.Result) {
		for _, problem := range reviewMarks(r) {
			t.Error(problem)
		}
	})
}

// reviewMarks is what a reviewer finds wrong with r's marks: one sentence
// per mark that disagrees with its event or its event with the run.
func reviewMarks(r *lab.Result) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	var lanes, page bytes.Buffer
	if err := reports.Lanes(&lanes, r); err != nil {
		return []string{err.Error()}
	}
	if err := reports.HTML(&page, r, reports.RunInfo{}); err != nil {
		return []string{err.Error()}
	}
	rows, order := laneRows(lanes.String())
	drawn := pageEvents(page.String())
	lostAcks := lostAckSeqs(r)
	for _, e := range r.Timeline {
		row, ok := rows[e.Seq]
		if !ok {
			bad("event #%d (%s %s) has no row in the lanes", e.Seq, e.Actor, e.Kind)
			continue
		}
		token := e.Kind == lab.KindFenced && e.Refusal == lab.RefusedByToken
		if strings.Contains(row, "FENCED") != token {
			bad("#%d %s %q (kind %s, refusal %q) is drawn %q", e.Seq, e.Actor, e.Action, e.Kind, e.Refusal, row)
		}
		if got := drawn[e.Seq].refusal; strings.Contains(got, "FENCED") != token {
			bad("#%d %s %q (refusal %q): the page says %q", e.Seq, e.Actor, e.Action, e.Refusal, got)
		}
		if e.Kind == lab.KindFenced && !token {
			label := "REFUSED"
			if e.Refusal == lab.RefusedByRowCount {
				label = "ROLLED BACK"
			}
			if e.Refusal == "" || !strings.Contains(row, label) {
				bad("#%d %s %q refused by %q is drawn %q", e.Seq, e.Actor, e.Action, e.Refusal, row)
			}
		}
		if e.Kind == lab.KindFenced {
			if preds, named := guardPredicates[e.Refusal]; named && !inStatements(preds, drawn[e.Seq].sql) {
				bad("#%d %s %q refused by %q: no statement the page lists for it holds %q", e.Seq, e.Actor, e.Action, e.Refusal, preds)
			}
		}
		drawnLost := e.Kind == lab.KindAckLost || e.Kind == lab.KindOffer && e.AckLost
		switch lost := lostAcks[e.Seq]; {
		case lost != drawnLost || lost != strings.Contains(row, "LOST"):
			bad("#%d %s: the ledger says its ack was lost: %v; it is %s (ack lost %v), drawn %q", e.Seq, e.Actor, lost, e.Kind, e.AckLost, row)
		case e.Kind == lab.KindAck && (e.Rows == nil || *e.Rows == 0):
			bad("#%d %s: drawn as an ack, yet it changed no row at the broker", e.Seq, e.Actor)
		}
	}
	for _, problem := range causesFirst(r, order) {
		bad("%s", problem)
	}
	return out
}

// causesFirst says where the lanes draw an effect above its cause: a
// consumer's effect, dedup, ack or refused ack above every delivery of its
// offer to it, or a delivery above every offer of its offer number (where
// the timeline holds such deliveries and offers at all).
func causesFirst(r *lab.Result, order map[int]int) []string {
	var out []string
	var deliveries, offers []lab.Event
	for _, e := range r.Timeline {
		switch e.Kind {
		case lab.KindDeliver:
			deliveries = append(deliveries, e)
		case lab.KindOffer:
			offers = append(offers, e)
		}
	}
	earlier := func(e lab.Event, causes []lab.Event, of func(lab.Event) bool) (found, before bool) {
		for _, c := range causes {
			if of(c) {
				found = true
				before = before || order[c.Seq] < order[e.Seq]
			}
		}
		return found, before
	}
	for _, e := range r.Timeline {
		switch {
		case e.Offer == 0:
		case e.Kind == lab.KindDeliver:
			if found, before := earlier(e, offers, func(o lab.Event) bool { return o.Offer == e.Offer }); found && !before {
				out = append(out, fmt.Sprintf("#%d delivers offer %d above its offer", e.Seq, e.Offer))
			}
		case e.Kind == lab.KindEffect || e.Kind == lab.KindDedup || e.Kind == lab.KindAck || e.Kind == lab.KindAckLost ||
			e.Kind == lab.KindFenced:
			if found, before := earlier(e, deliveries, func(d lab.Event) bool { return d.Offer == e.Offer && d.To == e.Actor }); found && !before {
				out = append(out, fmt.Sprintf("#%d %s's %s of offer %d is drawn above its delivery", e.Seq, e.Actor, e.Kind, e.Offer))
			}
		}
	}
	return out
}

// laneRowRE is a lane row's first line: its event's number, then its clock.
var laneRowRE = regexp.MustCompile(`^  (\d+)\s`)

// laneRows reads a lane view: each event's row, its lines joined, by the
// event's number, and where each row stands (from 0, top down).
func laneRows(lanes string) (rows map[int]string, order map[int]int) {
	rows, order = map[int]string{}, map[int]int{}
	seq := 0
	for _, line := range strings.Split(lanes, "\n") {
		switch m := laneRowRE.FindStringSubmatch(line); {
		case m != nil:
			seq, _ = strconv.Atoi(m[1])
			order[seq] = len(order)
			rows[seq] = strings.Join(strings.Fields(line), " ")
		case seq != 0 && strings.HasPrefix(line, "   "):
			rows[seq] += " " + strings.Join(strings.Fields(line), " ")
		default:
			seq = 0
		}
	}
	return rows, order
}

// pageEvent is what the page says of one event: the guard its detail
// names, and the run's statements it lists for that kind of event.
type pageEvent struct {
	refusal string
	sql     []string
}

// pageEventRE is an event's mark on the page, with its data attributes.
var pageEventRE = regexp.MustCompile(`<g class="ev [^"]*" tabindex="0" data-seq="(\d+)"[^>]*? data-refusal="([^"]*)"[^>]*? data-sql="([^"]*)"`)

// pageEvents reads a page's events by number.
func pageEvents(page string) map[int]pageEvent {
	out := map[int]pageEvent{}
	for _, m := range pageEventRE.FindAllStringSubmatch(page, -1) {
		seq, _ := strconv.Atoi(m[1])
		var stmts []struct {
			SQL string `json:"sql"`
		}
		_ = json.Unmarshal([]byte(html.UnescapeString(m[3])), &stmts)
		e := pageEvent{refusal: html.UnescapeString(m[2])}
		for _, s := range stmts {
			e.sql = append(e.sql, s.SQL)
		}
		out[seq] = e
	}
	return out
}

// inStatements says whether the WHERE clause of one of the statements
// holds one of the predicates.
func inStatements(predicates, statements []string) bool {
	for _, s := range statements {
		_, where, ok := strings.Cut(s, "WHERE")
		for _, p := range predicates {
			if ok && strings.Contains(where, p) {
				return true
			}
		}
	}
	return false
}

// lostAckSeqs are the events the ledgers record as acks that never
// reached their peer: a consumer's ack the broker never saw, and the
// broker's ack of a relay's send that the relay never saw.
func lostAckSeqs(r *lab.Result) map[int]bool {
	out := map[int]bool{}
	column := map[string]string{"Ledger: consumer acknowledgements": "Result", "Ledger: relay sends": "Broker answer"}
	for _, tb := range r.Tables {
		name, ok := column[tb.Title]
		if !ok {
			continue
		}
		result, number := slices.Index(tb.Columns, name), slices.Index(tb.Columns, "#")
		if result < 0 || number < 0 {
			continue
		}
		for _, row := range tb.Rows {
			if seq, err := strconv.Atoi(row[number]); err == nil && strings.Contains(row[result], "LOST") {
				out[seq] = true
			}
		}
	}
	return out
}

// TestReviewMarksFindsEachFlaw: the reviewer of TestLaneMarksAgreeWithTheRun
// finds each flaw it looks for, planted in a small run: a refusal nobody
// read back, a guard (or a token) no statement of the run holds, an ack
// the ledger records lost drawn as an ack, an ack drawn though it changed
// no row.
func TestReviewMarksFindsEachFlaw(t *testing.T) {
	t.Parallel()
	base := func() *lab.Result {
		return &lab.Result{
			Statements: []lab.Statement{{Name: "relay: complete under the current token", Runs: 2, Rows: 1,
				SQL: "UPDATE outbox_events SET delivered = 1 WHERE event_id = :id AND claim_token = :token AND delivered = 0"}},
			Timeline: []lab.Event{
				{Seq: 1, At: "t=1", Actor: "Relay-A", Action: "complete", Kind: lab.KindFenced, Refusal: lab.RefusedByToken, Subject: "e1",
					Rows: lab.RowsOf(0)},
				{Seq: 2, At: "t=2", Actor: "Consumer-1", Action: "ack", Kind: lab.KindAck, Subject: "e1", Offer: 1, Rows: lab.RowsOf(1)},
			},
			Tables: []lab.Table{{Title: "Ledger: consumer acknowledgements", Columns: []string{"#", "Result"}, Rows: [][]string{{"2", "acked"}}}},
		}
	}
	if problems := reviewMarks(base()); len(problems) > 0 {
		t.Fatalf("the sound run has problems: %q", problems)
	}
	for name, plant := range map[string]func(*lab.Result){
		"NotReadBack":  func(r *lab.Result) { r.Timeline[0].Refusal = "" },
		"GuardNotRun":  func(r *lab.Result) { r.Timeline[0].Refusal = lab.RefusedByOwner },
		"LeaseNotRun":  func(r *lab.Result) { r.Timeline[0].Refusal = lab.RefusedByLease },
		"LostDrawnAck": func(r *lab.Result) { r.Tables[0].Rows[0][1] = "ack LOST on the way to the broker" },
		"AckOfNoRow":   func(r *lab.Result) { r.Timeline[1].Rows = lab.RowsOf(0) },
		"NoTokenRan": func(r *lab.Result) {
			r.Statements[0].SQL = strings.Replace(r.Statements[0].SQL, "AND claim_token = :token ", "", 1)
		},
	} {
		r := base()
		plant(r)
		if problems := reviewMarks(r); len(problems) == 0 {
			t.Errorf("%s: the reviewer found nothing", name)
		}
	}
}
