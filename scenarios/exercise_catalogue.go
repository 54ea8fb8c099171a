package scenarios

import "github.com/outboxlab/outboxlab/store"

// Parameters as the lessons bind them. Day 15's tables and the broker's
// hold times as UTC text with milliseconds; the relay's outbox_events
// holds logical integer ticks.
var (
	pNowText   = Param{Name: "now", Holds: "the worker's clock, UTC text with milliseconds ('2026-01-15T09:00:00.000Z')", Sample: "2026-01-15T09:00:00.000Z"}
	pUntilText = Param{Name: "until", Holds: "the end of the lease this claim takes: now plus the lease, in the same text form", Sample: "2026-01-15T09:00:30.000Z"}
	pWorker    = Param{Name: "worker", Holds: "the worker's name, e.g. 'Worker-A': the owner it writes into LockedBy", Sample: "Worker-A"}
	pMessageID = Param{Name: "id", Holds: "the message's Id (an integer)", Sample: int64(1)}
	pNowTick   = Param{Name: "now", Holds: "the scenario clock, a logical integer tick", Sample: int64(100)}
	pEventID   = Param{Name: "id", Holds: "the outbox event's event_id (text, e.g. 'E-41')", Sample: "E-1"}
	pToken     = Param{Name: "token", Holds: "the fencing token the worker's own claim returned (claim_token as its claim left it)", Sample: int64(1)}
)

// mustCompleteUnderToken is what a relay's completion (an ack) must do.
const mustCompleteUnderToken = "Sets delivered = 1 and delivered_at = :now on event :id and changes 1 row only when " +
	":token is the event's current claim_token and it is not yet delivered; 0 rows otherwise."

// scaleCheckRows are the rows a session 21 file is checked on: message 1
// Processing under Worker-A's lease with token 1, as the samples' claims
// name it, so the check runs the statement over a row it changes.
const scaleCheckRows = `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, Status, CreatedAtUtc, LockedBy, LockedUntilUtc, ClaimToken)
VALUES ('PaymentCreated', 'PAY-1', '{}', 'Processing', '2026-01-15T08:59:00.000Z', 'Worker-A', '2026-01-15T09:00:30.000Z', 1)`

// exercises are the course's exercises, in its order: one per statement a
// lesson teaches whose classic wrong answers the lab holds.
var exercises = []Exercise{
	{
		Name: "claim", Lesson: "session-15-outbox-leasing",
		Key:         []store.Stmt{store.ClaimSelectNext, store.ClaimUpdate},
		Shapes:      store.ClaimSlot.Shapes,
		Alternative: store.ClaimSlot.Alternative,
		Schema:      store.ClaimSlot.Schema,
		CheckRows:   store.ClaimSlot.CheckRows,
		Task: "Two workers drain one outbox concurrently, each on its own connection, and a worker may crash holding a " +
			"message. Write the claim: a SELECT of the oldest claimable message's Id, then an UPDATE that takes message :id " +
			"with a lease, so that no message is ever owned by two workers at once and a crashed worker's message is " +
			"taken again once its lease has run out.",
		Must: "The SELECT returns one integer column, the Id of the oldest claimable message (none when nothing is " +
			"claimable). The UPDATE sets Status = 'Processing', LockedBy = :worker and LockedUntilUtc = :until on message " +
			":id and changes exactly one row when the claim holds, 0 when another worker owns the message. Or write the " +
			"claim as one statement, as production outboxes do: an UPDATE that takes the oldest claimable message and " +
			"returns its Id (RETURNING Id), no row when nothing is claimable.",
		Params: []Param{pNowText, pWorker, pUntilText, {Name: "id", Holds: "the Id the SELECT returned", Sample: int64(1), Statement: 2}},
	},
	{
		Name: "finalize", Lesson: "session-15-late-finalize",
		Key:    []store.Stmt{store.FinalizeOwned},
		Shapes: []store.Shape{{Kind: store.KindUpdate, Table: "OutboxMessages"}},
		Schema: []store.Migration{store.PaymentsOutbox, store.OutboxLeasing},
		Task: "A worker that stalls past its lease may wake after another worker has reclaimed its message. Write the " +
			"finalize that marks message :id Processed, so that only the worker that owns the message now can finalize " +
			"it and a worker whose lease was taken over changes nothing; the owner's finalize sent again after it " +
			"committed (a retry after a lost reply) changes nothing either.",
		Must: "Sets Status = 'Processed' and ProcessedAtUtc = :now on message :id and changes 1 row when :worker owns it " +
			"(it is Processing under :worker's lease), 0 rows otherwise: the worker then rolls its transaction back.",
		Params: []Param{pNowText, pMessageID, {Name: "worker", Holds: "the finalizing worker's name", Sample: "Worker-A"}},
	},
	{
		Name: "fenced-claim", Lesson: "session-16-stale-ack-fencing",
		Key:    []store.Stmt{store.ClaimEvent},
		Shapes: []store.Shape{{Kind: store.KindUpdate, Table: "outbox_events"}},
		Schema: []store.Migration{store.RelayEvents},
		Task: "Session 16 fences every write of a lease holder with a token. Write the claim of event :id that takes it " +
			"only when it is claimable and hands the new owner a token no earlier claim had, so that a stale owner's " +
			"later ack can be told apart and refused.",
		Must: "Changes 1 row when event :id is undelivered and its lease is free or ended (lease_until <= :now), setting " +
			"locked_by = :relay, lease_until = :until and a claim_token greater than any before it; 0 rows otherwise. " +
			"The lab reads the new token back in the same transaction.",
		Params: []Param{{Name: "relay", Holds: "the claiming worker's name, e.g. 'Worker-A'", Sample: "Worker-A"},
			{Name: "until", Holds: "the lease end this claim takes, a logical tick", Sample: int64(150)}, pEventID, pNowTick},
	},
	{
		Name: "ack", Lesson: "session-16-stale-ack-fencing",
		Key:    []store.Stmt{store.CompleteWithToken},
		Shapes: []store.Shape{{Kind: store.KindUpdate, Table: "outbox_events"}},
		Schema: []store.Migration{store.RelayEvents},
		Task: "Worker-A's lease on event E-41 expires and Worker-B claims it with a new token; then Worker-A, unaware, " +
			"acknowledges. Write the ack that marks event :id delivered only for the worker that holds the current " +
			"token, so the stale ack changes nothing and the current one succeeds once: sent again after it committed (a " +
			"retry after a lost reply), it changes nothing.",
		Must:   mustCompleteUnderToken,
		Params: []Param{pNowTick, pEventID, pToken},
	},
	{
		Name: "renew", Lesson: "session-17-lease-renewal",
		Key:    []store.Stmt{store.RenewLease},
		Shapes: []store.Shape{{Kind: store.KindUpdate, Table: "outbox_events"}},
		Schema: []store.Migration{store.RelayEvents},
		Task: "A worker with a long job renews its lease. Write the renewal of event :id that moves its lease to " +
			":proposed only for the current token holder, only while the lease is still live and only forward, so a " +
			"stale owner cannot revive an expired lease or shorten the current owner's.",
		Must: "Sets lease_until = :proposed on event :id and changes 1 row only when :token is current, the event is " +
			"undelivered, the lease is live (lease_until > :now: at lease_until it has expired) and :proposed is later " +
			"than lease_until; 0 rows otherwise.",
		Params: []Param{{Name: "proposed", Holds: "the new lease end the worker asks for, a logical tick", Sample: int64(160)},
			pEventID, pToken, pNowTick},
	},
	{
		Name: "complete-after-send", Lesson: "session-18-lease-expiry-after-send",
		Key:    []store.Stmt{store.CompleteWithToken},
		Shapes: []store.Shape{{Kind: store.KindUpdate, Table: "outbox_events"}},
		Schema: []store.Migration{store.RelayEvents, store.BrokerInbox},
		Task: "Relay-A sends an event to the broker and stalls; its lease expires, Relay-B claims and sends it again, and " +
			"Relay-A's late completion arrives. Write the relay's completion of event :id after a send, so that only " +
			"the relay holding the current token publishes the row.",
		Must:   mustCompleteUnderToken,
		Params: []Param{pNowTick, pEventID, pToken},
	},
	{
		Name: "inbox-insert", Lesson: "session-19-failure-classes",
		Key:    []store.Stmt{store.RecordConsumed},
		Shapes: []store.Shape{{Kind: store.KindInsert, Table: "consumed_events"}},
		Schema: []store.Migration{store.RelayEvents, store.BrokerInbox},
		Task: "Deliveries repeat: a resend, a lost broker ack, a lost consumer ack, two deliveries at once. The consumer " +
			"credits an account only when its inbox insert added a row, in the same transaction. Write that inbox " +
			"insert, so every delivery of one event after the first adds nothing and its credit happens once.",
		Must: "Inserts the row (:consumer, :event_id, :now) into consumed_events and changes 1 row the first time this " +
			"consumer sees :event_id, 0 rows (no error) every later time.",
		Params: []Param{{Name: "consumer", Holds: "the consumer service's name, e.g. 'account-service'", Sample: "account-service"},
			{Name: "event_id", Holds: "the event id the delivery carries", Sample: "E-1"},
			{Name: "now", Holds: "the consumer's clock, UTC text with milliseconds", Sample: "2026-01-15T09:00:00.000Z"}},
	},
	{
		Name: "projection", Lesson: "session-19-failure-classes",
		Key:    []store.Stmt{store.ProjectNewerVersion},
		Shapes: []store.Shape{{Kind: store.KindInsert, Table: "projections"}},
		Schema: []store.Migration{store.RelayEvents, store.BrokerInbox},
		Task: "After a crash and a lease expiry, events reach the consumer out of order. Write the projection update that " +
			"records entity :entity_id at :version with :state, so the projection never moves back to an older version.",
		Must: "Inserts the entity's first row, or updates the stored row only when :version is newer than its version " +
			"(1 row changed); an event carrying an older or equal version changes 0 rows.",
		Params: []Param{{Name: "entity_id", Holds: "the entity the event is about, e.g. 'ACC-6'", Sample: "ACC-1"},
			{Name: "version", Holds: "the entity's version the event carries (an integer)", Sample: int64(1)},
			{Name: "state", Holds: "the entity's state in that version, e.g. 'frozen'", Sample: "active"},
			{Name: "now", Holds: "the consumer's clock, UTC text with milliseconds", Sample: "2026-01-15T09:00:00.000Z"}},
	},
	{
		Name: "scale-finalize", Lesson: "session-21-claims-at-scale",
		Key:       []store.Stmt{store.ScaleFinalize},
		Shapes:    []store.Shape{{Kind: store.KindUpdate, Table: "OutboxMessages"}},
		Schema:    []store.Migration{store.PaymentsOutbox, store.OutboxLeasing, store.OutboxFencing, store.ClaimsAtScale},
		CheckRows: scaleCheckRows,
		Task: "At scale, four workers drain a backlog and one of them stalls past its lease while another takes its " +
			"message over; later it stalls again, and a second claimer under its own name takes that message back, " +
			"finalizes it, and sends the same finalize again, as a retry after a lost reply would. Write the finalize of message :id, so it marks the message Processed only while this worker still owns it " +
			"under the token its claim returned.",
		Must: "Sets Status = 'Processed' and ProcessedAtUtc = :now on message :id and changes 1 row only when it is " +
			"Processing under :worker with ClaimToken = :token; 0 rows otherwise.",
		Params: []Param{pNowText, pMessageID, {Name: "worker", Holds: "the finalizing worker's name", Sample: "Worker-A"}, pToken},
	},
	{
		Name: "batch-complete", Lesson: "session-21-batch-completion",
		Key:       []store.Stmt{store.FetchAheadComplete},
		Shapes:    []store.Shape{{Kind: store.KindUpdate, Table: "OutboxMessages", ReturnsID: true}},
		Schema:    []store.Migration{store.PaymentsOutbox, store.OutboxLeasing, store.OutboxFencing, store.ClaimsAtScale},
		CheckRows: scaleCheckRows,
		Task: "A completer flushes a batch of finished messages in one statement, and it may stall past the lease while " +
			"another process refetches and redoes them; a completer whose flush committed may send the same flush again, " +
			"as a retry after a lost reply would. Write the batch completion, so each row is marked Processed " +
			"only while this worker still owns it under the token its own fetch returned.",
		Must: "Marks Processed (ProcessedAtUtc = :now) each message of :claims that is still Processing under :worker " +
			"with that message's token, and returns the Id of each row it changed (RETURNING Id); a row another fetch " +
			"has taken since is left alone.",
		Params: []Param{{Name: "claims", Holds: "the batch as JSON text, an array of [Id, token] pairs, e.g. '[[1,3],[2,3]]'", Sample: "[[1,1]]"},
			pNowText, {Name: "worker", Holds: "the completing process's worker name", Sample: "Worker-A"}},
	},
}
