package cast

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/outboxlab/outboxlab/clock"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds session 22's lease-keeping relay: a relay whose heartbeat
// renews its lease while the work runs and cancels the work's context when a
// renewal changes 0 rows, and the graceful shutdown of such a relay. Time is
// the scenario clock in ticks (milliseconds since LessonStart); the stage
// fires each heartbeat when the script advances the clock past its slot, and
// waits for its answer, so a run is deterministic without any sleep.

// Why a job's work context was cancelled (its [context.Cause]).
var (
	// ErrLeaseLost: a renewal changed 0 rows because a newer claim holds the
	// event: another relay reclaimed it.
	ErrLeaseLost = errors.New("lease lost")
	// ErrLeaseExpired: a renewal under the relay's still-current token
	// changed 0 rows because its lease had ended: lease_until > :now refused
	// it, whether or not another relay will reclaim the event.
	ErrLeaseExpired = errors.New("lease expired")
	// ErrProcessingDeadline: a renewal was refused because the new lease
	// would end past claimed_at + the maximum processing time.
	ErrProcessingDeadline = errors.New("processing deadline reached")
	// ErrShuttingDown: the relay was told to stop before the job's send.
	ErrShuttingDown = errors.New("shutting down")
	// ErrRunOver ends work still running when the stage closes.
	ErrRunOver = errors.New("the run is over")
)

// LeaseLossPolicy is what a relay does when its heartbeat's renewal
// changes 0 rows.
type LeaseLossPolicy string

// The policies peers follow.
const (
	// CancelWork cancels the work's context, as Temporal's heartbeat
	// cancels an activity: nothing after it is sent or written.
	CancelWork LeaseLossPolicy = "cancel the work"
	// LogOnly logs the failed renewal and lets the work run to its end, as
	// Hangfire's sliding lease does.
	LogOnly LeaseLossPolicy = "log it and go on"
)

// HeartbeatPolicy is how a relay keeps its lease. Durations are in ticks.
type HeartbeatPolicy struct {
	Lease int64 // how long a claim or a renewal holds the event
	// Margin is the safety margin: the heartbeat renews when the lease has
	// Margin left (Lease - Margin after it began).
	Margin        int64
	Delay         int64 // each beat fires this late: a busy scheduler, a GC pause
	MaxProcessing int64 // no renewal may move the lease past claimed_at + MaxProcessing
	OnLeaseLost   LeaseLossPolicy
}

// Reasons a renewal changed no row, as the renewal ledger records them.
const (
	RenewalLeaseLost = "lease-lost" // a newer token holds the event: another relay reclaimed it
	RenewalExpired   = "expired"    // the token is still the relay's, but the lease had ended
	RenewalDeadline  = "deadline"   // past claimed_at + the maximum processing time
	RenewalDelivered = "delivered"  // the token is still the relay's, and the event is delivered: already done
)

// HeartbeatStage is where session 22 plays: the scenario clock, the broker
// the relays send to, the timeline, the ledgers, and the jobs whose
// heartbeats it fires as the clock moves.
type HeartbeatStage struct {
	Clock    *clock.Manual
	timeline *lab.Timeline
	broker   store.Broker
	jobs     []*HeartbeatJob // jobs whose heartbeat still runs
	all      []*HeartbeatJob // every job, to end their work when the run ends

	Claims        []HeartbeatClaim
	Renewals      []RenewalEntry
	Sends         []HeartbeatSend
	Completions   []HeartbeatCompletion
	Cancellations []Cancellation

	taken   int                        // the last timeline line TakeRecord took
	adopted map[string]*HeartbeatRelay // relays of other processes, by name, for their adopted jobs
}

// HeartbeatClaim is one claim attempt (a poll) in the claim ledger.
type HeartbeatClaim struct {
	Seq        int
	At         int64
	Relay      string
	Event      string // "" when nothing was claimable
	Outcome    string
	Token      int64
	LeaseUntil int64
}

// RenewalEntry is one heartbeat renewal and the rows it changed.
type RenewalEntry struct {
	Seq        int
	At         int64
	Relay      string
	Event      string
	Token      int64
	LeaseUntil int64 // the lease it proposed: now + lease
	Rows       int64
	Reason     string // for 0 rows: RenewalLeaseLost, RenewalExpired, RenewalDeadline or RenewalDelivered
	Why        string
	Sent       bool // the renewing job had sent its event
}

// HeartbeatSend is one send to the broker.
type HeartbeatSend struct {
	Seq     int
	At      int64
	Relay   string
	Event   string
	Token   int64
	OfferID int64
}

// HeartbeatCompletion is one completion and the rows it changed.
type HeartbeatCompletion struct {
	Seq       int
	At        int64
	Relay     string
	Event     string
	Token     int64 // 0 for a completion that presents none
	Statement string
	Rows      int64
	Sent      bool // the completing job had sent the event
}

// Cancellation is one work context cancelled, and why.
type Cancellation struct {
	Seq   int
	At    int64
	Relay string
	Event string
	Cause error
	Sent  bool // the send had happened before the cancellation
}

// NewHeartbeatStage returns a stage whose clock stands at LessonStart,
// recording into tl, with relays sending to broker.
func NewHeartbeatStage(tl *lab.Timeline, broker store.Broker) *HeartbeatStage {
	return &HeartbeatStage{Clock: clock.NewManual(LessonStart), timeline: tl, broker: broker}
}

// Now is the clock in ticks.
func (s *HeartbeatStage) Now() int64 { return s.Clock.Now().Sub(LessonStart).Milliseconds() }

// Event adds a timeline line of kind at the current time and returns its
// number.
func (s *HeartbeatStage) Event(kind lab.Kind, actor, action, detail string) int {
	return s.Add(lab.Event{Kind: kind, Actor: actor, Action: action, Detail: detail})
}

// Add adds e to the timeline at the current time and returns its
// number.
func (s *HeartbeatStage) Add(e lab.Event) int {
	e.At = TickClock(s.Now())
	return s.timeline.Add(e)
}

func (s *HeartbeatStage) setNow(t int64) { s.Clock.Set(LessonStart.Add(TickSpan(t))) }

// AdvanceTo moves the clock to t, firing on the way, in time order, every
// heartbeat whose slot has come, except those of frozen relays. A beat
// whose slot passed while its relay was frozen fires when the clock next
// moves after the relay resumed.
func (s *HeartbeatStage) AdvanceTo(ctx context.Context, t int64) error {
	for {
		fired, err := s.FireNextBeat(ctx, t)
		if err != nil {
			return err
		}
		if !fired {
			break
		}
	}
	s.setNow(max(s.Now(), t))
	return nil
}

// FireNextBeat fires the one heartbeat AdvanceTo(t) would fire first, the
// earliest due by t of a relay not frozen, and reports whether there was
// one; the clock moves to its slot (if later than now) and no further.
// A lab that plays relays in several processes fires their beats one at
// a time with it, in the order one stage would (see [HeartbeatStage.NextBeat]).
func (s *HeartbeatStage) FireNextBeat(ctx context.Context, t int64) (bool, error) {
	j := s.nextBeat(t)
	if j == nil {
		return false, nil
	}
	s.setNow(max(s.Now(), j.nextBeat))
	return true, j.beat(ctx)
}

// DueBeat is a job's next heartbeat: its slot and whose job it is.
type DueBeat struct {
	At    int64
	Relay string
	Event string
	Token int64
}

// NextBeat is the heartbeat the stage will fire next, the earliest of a
// relay not frozen, if any.
func (s *HeartbeatStage) NextBeat() (DueBeat, bool) {
	j := s.nextBeat(math.MaxInt64)
	if j == nil {
		return DueBeat{}, false
	}
	return DueBeat{At: j.nextBeat, Relay: j.relay.Name, Event: j.Event, Token: j.Token}, true
}

// Wake is AdvanceTo(t) for a stage whose process was stopped until t (a
// real SIGSTOP, then SIGCONT): the clock jumps to t first, so each beat
// that fell due meanwhile fires now, overdue, as a resumed relay's does.
func (s *HeartbeatStage) Wake(ctx context.Context, t int64) error {
	s.setNow(max(s.Now(), t))
	return s.AdvanceTo(ctx, t)
}

// nextBeat is the running job with the earliest beat due by t.
func (s *HeartbeatStage) nextBeat(t int64) *HeartbeatJob {
	var next *HeartbeatJob
	for _, j := range s.jobs {
		if j.relay.frozen || j.nextBeat > t {
			continue
		}
		if next == nil || j.nextBeat < next.nextBeat {
			next = j
		}
	}
	return next
}

// Close stops every heartbeat, and every work still running, at the end
// of a run.
func (s *HeartbeatStage) Close() {
	for _, j := range s.all {
		j.cancelCause(ErrRunOver)
		if j.hung != nil {
			<-j.hung
		}
		j.stopHeartbeat()
	}
}

// HeartbeatRelay is one relay process: its own connection, its heartbeat
// policy and the jobs it holds.
type HeartbeatRelay struct {
	Name        string
	stage       *HeartbeatStage
	relay       *store.Relay
	keeper      *store.LeaseKeeper
	sqls        store.HeartbeatSQL
	policy      HeartbeatPolicy
	frozen      bool
	frozen0     int64      // when the current freeze began
	frozenSpans [][2]int64 // past freezes, [from, to)
	// stopping is set by the stop signal: the relay claims nothing more.
	stopping bool
	held     []*HeartbeatJob
}

// NewRelay starts a relay named name on db, running the statements sqls
// with the heartbeat policy p.
func (s *HeartbeatStage) NewRelay(name string, db *store.DB, sqls store.HeartbeatSQL, p HeartbeatPolicy) *HeartbeatRelay {
	return s.NewRelayIn(name, "relay process on its own connection", db, sqls, p)
}

// NewRelayIn is NewRelay for a relay whose process is described by
// process on the timeline, e.g. a child process and its pid.
func (s *HeartbeatStage) NewRelayIn(name, process string, db *store.DB, sqls store.HeartbeatSQL, p HeartbeatPolicy) *HeartbeatRelay {
	s.Event(lab.KindNote, name, "start", process+"; "+p.describe())
	return &HeartbeatRelay{Name: name, stage: s, relay: store.NewRelay(db, sqls.Relay), keeper: store.NewLeaseKeeper(db, sqls), sqls: sqls, policy: p}
}

func (p HeartbeatPolicy) describe() string {
	return fmt.Sprintf("lease %s, renews when %s is left, on lease loss: %s", DurationText(p.Lease), DurationText(p.Margin), p.OnLeaseLost)
}

// Poll claims the oldest claimable event, with a lease and a heartbeat. It
// returns nil when nothing was claimable, or when the relay is stopping:
// then it does not even ask.
func (r *HeartbeatRelay) Poll(ctx context.Context) (*HeartbeatJob, error) {
	s, now := r.stage, r.stage.Now()
	if r.stopping {
		s.Event(lab.KindNote, r.Name, "poll skipped", "stopping: no new claim after the stop signal")
		return nil, nil
	}
	c, err := r.relay.ClaimNext(ctx, now, store.EventLease{Owner: r.Name, Until: now + r.policy.Lease})
	if err != nil {
		return nil, err
	}
	entry := HeartbeatClaim{At: now, Relay: r.Name, Event: c.EventID, Outcome: string(c.Outcome)}
	if c.Outcome != store.Claimed {
		entry.Seq = s.Event(lab.KindEmpty, r.Name, "poll", "nothing claimable ("+string(c.Outcome)+")")
		s.Claims = append(s.Claims, entry)
		return nil, nil
	}
	entry.Token, entry.LeaseUntil = c.Token, c.LeaseUntil
	entry.Seq = s.Add(lab.Event{Kind: lab.KindClaim, Subject: c.EventID, Until: TickClock(c.LeaseUntil), Rows: lab.RowsOf(1),
		Actor: r.Name, Action: "claim " + c.EventID, Detail: fmt.Sprintf("token %d, lease until %s, claimed_at %s; heartbeat started",
			c.Token, ShortClock(c.LeaseUntil), ShortClock(now))})
	s.Claims = append(s.Claims, entry)
	j := r.startJob(ctx, c, now)
	return j, nil
}

// Freeze stops the relay's process (a stop-the-world pause, a frozen VM):
// neither its heartbeat nor its work runs until Resume.
func (r *HeartbeatRelay) Freeze(why string) {
	r.frozen, r.frozen0 = true, r.stage.Now()
	r.stage.Event(lab.KindStall, r.Name, "frozen", why)
}

// Resume lets the frozen relay run again. Its overdue heartbeat fires at
// once, before the work's next step.
func (r *HeartbeatRelay) Resume(ctx context.Context) error {
	return r.ResumeBy(ctx, "")
}

// ResumeBy is Resume, its timeline line saying also how the process was
// let run again (e.g. by SIGCONT), unless how is "". For a relay of
// another process (see [HeartbeatStage.AdoptedRelay]) it ends the freeze
// here; its overdue heartbeat fires in its own process.
func (r *HeartbeatRelay) ResumeBy(ctx context.Context, how string) error {
	r.frozen = false
	r.frozenSpans = append(r.frozenSpans, [2]int64{r.frozen0, r.stage.Now()})
	detail := "the process runs again; its overdue heartbeat fires first"
	if how != "" {
		detail += "; " + how
	}
	r.stage.Event(lab.KindWake, r.Name, "resumes", detail)
	return r.stage.AdvanceTo(ctx, r.stage.Now())
}

// Stop is the stop signal (SIGTERM, simulated in-process: the relay is a
// goroutine; with --processes see StopOnSignal): the relay
// stops polling at once, and
// cancels the work of every job whose send has not happened; those leases
// are left to expire. A job already sent may finish within the grace period.
func (r *HeartbeatRelay) Stop(grace int64) {
	r.stop(grace, "simulated in-process (a Stop call; with run --processes the relay is a child process sent a real SIGTERM)")
}

// StopOnSignal is Stop for a relay that is a process of its own (run
// --processes): the lab sent process pid a real SIGTERM, which the relay
// caught with signal.Notify.
func (r *HeartbeatRelay) StopOnSignal(grace int64, pid int) {
	r.stop(grace, fmt.Sprintf("a real SIGTERM from the lab to process %d, caught by its signal.Notify", pid))
}

// stop stops the relay; how says how the stop signal arrived.
func (r *HeartbeatRelay) stop(grace int64, how string) {
	r.stopping = true
	r.stage.Event(lab.KindNote, r.Name, "SIGTERM", fmt.Sprintf("%s: stop polling now; in-flight sends may finish within the %s grace period (until %s)",
		how, DurationText(grace), ShortClock(r.stage.Now()+grace)))
	for _, j := range append([]*HeartbeatJob(nil), r.held...) {
		if !j.sent {
			j.cancelWork(ErrShuttingDown, "not sent yet: the work stops; the lease is left to expire at "+ShortClock(j.LeaseUntil))
			j.stopHeartbeat()
		}
	}
}

// Exit ends the stopped relay's process: it runs the shutdown step on the
// events it still holds and returns them. The lesson's step runs nothing,
// so they stay claimable once their leases expire.
func (r *HeartbeatRelay) Exit(ctx context.Context) ([]string, error) {
	s, now := r.stage, r.stage.Now()
	var held, unsent []string
	for _, j := range r.held {
		held = append(held, j.Event)
		if !r.sentEvent(j.Event) {
			unsent = append(unsent, j.Event)
		}
		j.stopHeartbeat()
	}
	marked, err := r.keeper.AtShutdown(ctx, r.Name, now)
	if err != nil {
		return nil, err
	}
	for _, id := range marked {
		sent := r.sentEvent(id)
		how, kind := "though never sent", lab.KindUnsent
		if sent {
			how, kind = "after its send", lab.KindFinalize
		}
		seq := s.Add(lab.Event{Kind: kind, Subject: id, Rows: lab.RowsOf(1), Actor: r.Name, Action: "marks complete",
			Detail: id + " marked delivered at shutdown, " + how})
		s.Completions = append(s.Completions, HeartbeatCompletion{Seq: seq, At: now, Relay: r.Name, Event: id,
			Statement: store.MarkHeldComplete.Name, Rows: 1, Sent: sent})
	}
	what := "their leases are left to expire"
	if len(marked) > 0 {
		what = fmt.Sprintf("the shutdown step marked %v delivered", marked)
	}
	s.Event(lab.KindNote, r.Name, "exits", fmt.Sprintf("process ends holding %s %v, %d of them unsent %v: %s",
		lab.Count(int64(len(held)), "event", "events"), held, len(unsent), unsent, what))
	return held, nil
}

func (r *HeartbeatRelay) sentEvent(id string) bool {
	for _, e := range r.stage.Sends {
		if e.Relay == r.Name && e.Event == id {
			return true
		}
	}
	return false
}

// frozenAt reports whether the relay was frozen at t.
func (r *HeartbeatRelay) frozenAt(t int64) bool {
	for _, sp := range r.frozenSpans {
		if t >= sp[0] && t < sp[1] {
			return true
		}
	}
	return r.frozen && t >= r.frozen0
}

// ShortClock prints a tick as the clock's time of day, e.g. 09:00:31.
func ShortClock(t int64) string { return TickClock(t)[11:19] }

// LeaseExpired adds the timeline line of the lease of event, which holder
// held through a freeze, running out with no heartbeat.
func (s *HeartbeatStage) LeaseExpired(event, holder string) {
	s.Add(lab.Event{Kind: lab.KindExpiry, Subject: event, Actor: "clock", Action: "lease expires",
		Detail: holder + "'s lease on " + event + " has expired; its heartbeat never ran"})
}

// Jobs are every job the stage's relays claimed, in claim order.
func (s *HeartbeatStage) Jobs() []*HeartbeatJob { return s.all }
