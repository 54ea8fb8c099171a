#!/usr/bin/env python3
"""The lab's reference relay in Python, standard library only.

It speaks the protocol of docs/relay-protocol.md (one JSON request per line
on stdout, one JSON reply per line on stdin) and passes every challenge of
`outboxlab challenge list`. Each --mistake is a known bug that makes named
checks fail: the challenges' answer keys, run by challenge's tests.

    outboxlab challenge run day15-worker --relay "python3 examples/relay-py/relay.py"
    outboxlab challenge run fenced-relay --relay "python3 examples/relay-py/relay.py --mistake no-token"
"""

import argparse
import json
import signal
import sys
from datetime import datetime, timedelta, timezone

MISTAKES = {
    "zero-rows-ok": "day15-worker: finalize commits although its owner-guarded update changed 0 rows",
    "no-owner-guard": "day15-worker: the completion updates the message by Id alone",
    "pending-only-claim": "day15-worker: the claim ignores expired leases",
    "own-clock": "day15-worker: leases are written and compared on the program's own clock",
    "skips-provider": "day15-worker: it stores Failed without asking the provider",
    "drops-transaction-id": "day15-worker: it stores Paid without the provider's transaction id",
    "ignores-skew": "day15-worker: it takes a lease as ended by its own clock, however far off it may be",
    "no-token": "fenced-relay: the completion names the event, not its token",
    "complete-before-send": "fenced-relay: the relay completes, then sends",
    "no-dedup": "inbox-consumer: the credit is applied whatever the inbox insert found",
    "ack-before-effect": "inbox-consumer: the delivery is acked before its effect commits",
    "no-renew": "heartbeat-relay: it works through the event on its first lease",
    "renew-without-stopping": "heartbeat-relay: a renewal that changed 0 rows does not stop the work",
    "ignore-sigterm": "heartbeat-relay: SIGTERM kills it where it stands, holding its claim",
    "no-deadline": "heartbeat-relay: the renewal has no processing deadline: it renews for as long as it works",
}

IDLE_MS = 100   # the wait when there is nothing to do
CHUNK_MS = 100  # the heartbeat relay's work between two renewals

# The errors a relay lives with: the work stays claimable and someone
# takes it again once its lease ends.
TOLERATED = {"database", "busy", "unknown_outcome", "broker_unavailable"}


class LabError(Exception):
    """A reply with "ok": false."""

    def __init__(self, error):
        super().__init__("%s: %s" % (error.get("kind"), error.get("message")))
        self.kind = error.get("kind")


class Lab:
    """The program's end of the protocol: one request, one reply."""

    def __init__(self):
        self.now = None
        self.tick = 0
        self.hello = self.ask({"op": "hello"})

    def ask(self, request):
        sys.stdout.write(json.dumps(request) + "\n")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)  # the lab closed the pipe: the run is over
        reply = json.loads(line)
        self.now, self.tick = reply["now"], reply["tick"]
        if not reply["ok"]:
            raise LabError(reply["error"])
        return reply

    def setting(self, name):
        return self.hello["settings"][name]

    def me(self):
        return self.hello["instance"]

    def begin(self):
        self.ask({"op": "begin"})

    def commit(self):
        self.ask({"op": "commit"})

    def rollback(self):
        self.ask({"op": "rollback"})

    def query(self, sql, **params):
        return self.ask({"op": "query", "sql": sql, "params": params})["rows"]

    def execute(self, sql, **params):
        return self.ask({"op": "exec", "sql": sql, "params": params})["rows_affected"]

    def wait(self, ms):
        """Waits ms on the lab clock; True when the lab is shutting down."""
        return self.ask({"op": "wait", "ms": ms}).get("shutdown", False)


def tolerate(err):
    """Lets the errors a relay lives with pass; others stop it."""
    if err.kind not in TOLERATED:
        raise err


def in_transaction(lab, body):
    """Runs body(lab) in a transaction and commits; a tolerated error rolls
    back (when the transaction is still open) and returns None."""
    lab.begin()
    try:
        result = body(lab)
    except LabError as err:
        tolerate(err)
        lab.rollback()
        return None
    if result is None:
        lab.rollback()
        return None
    try:
        lab.commit()
    except LabError as err:
        tolerate(err)  # the transaction is over either way
        return None
    return result


def lab_time(text):
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def lab_text(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


# The Day 15 worker: claim a payment's message with a lease, ask the
# provider, finalize the payment and the message while the claim is ours.

SELECT_CLAIMABLE = """SELECT Id, AggregateKey FROM OutboxMessages
WHERE Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now)
ORDER BY CreatedAtUtc, Id LIMIT 1"""
TAKE_CLAIMABLE = """UPDATE OutboxMessages SET Status = 'Processing', LockedBy = :me, LockedUntilUtc = :until
WHERE Id = :id AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))"""
SELECT_PENDING = """SELECT Id, AggregateKey FROM OutboxMessages WHERE Status = 'Pending'
ORDER BY CreatedAtUtc, Id LIMIT 1"""
TAKE_PENDING = """UPDATE OutboxMessages SET Status = 'Processing', LockedBy = :me, LockedUntilUtc = :until
WHERE Id = :id AND Status = 'Pending'"""
COMPLETE_OWNED = """UPDATE OutboxMessages SET Status = 'Processed', ProcessedAtUtc = :now
WHERE Id = :id AND Status = 'Processing' AND LockedBy = :me"""
COMPLETE_BY_ID = "UPDATE OutboxMessages SET Status = 'Processed', ProcessedAtUtc = :now WHERE Id = :id"
APPLY_OUTCOME = """UPDATE Payments SET PaymentStatus = :status, TransactionId = :txn, UpdatedAtUtc = :now
WHERE IdempotencyKey = :key"""


def day15_worker(lab, mistake):
    lease = timedelta(milliseconds=lab.setting("lease_ms"))
    skew = timedelta(milliseconds=lab.setting("max_clock_skew_ms"))

    def now():
        if mistake == "own-clock":
            return datetime.now(timezone.utc)
        return lab_time(lab.now)

    def claim(lab):
        select, take = SELECT_CLAIMABLE, TAKE_CLAIMABLE
        if mistake == "pending-only-claim":
            select, take = SELECT_PENDING, TAKE_PENDING
        t = now()
        # Another instance's lease has ended for sure only once this clock,
        # less the most it may be off, has passed its end.
        ended = t if mistake == "ignores-skew" else t - skew
        rows = lab.query(select, now=lab_text(ended))
        if not rows:
            return None
        message_id, key = rows[0]
        if lab.execute(take, id=message_id, me=lab.me(), now=lab_text(ended), until=lab_text(t + lease)) != 1:
            return None
        return message_id, key

    while True:
        claimed = in_transaction(lab, claim)
        if claimed is None:
            if lab.wait(IDLE_MS):
                return
            continue
        message_id, key = claimed
        if mistake == "skips-provider":
            answer = {"status": "Failed"}
        else:
            answer = lab.ask({"op": "provider", "key": key})

        def finalize(lab):
            complete = COMPLETE_BY_ID if mistake == "no-owner-guard" else COMPLETE_OWNED
            t = lab_text(now())
            changed = lab.execute(complete, id=message_id, me=lab.me(), now=t)
            if changed != 1 and mistake != "zero-rows-ok":
                return None  # another worker took the message over: its outcome is theirs to store
            txn = answer.get("transaction_id") if answer["status"] == "Paid" else None
            if mistake == "drops-transaction-id" and txn is not None:
                txn = ""
            lab.execute(APPLY_OUTCOME, status=answer["status"], txn=txn, now=t, key=key)
            return True

        in_transaction(lab, finalize)


# The fenced relay: claim with a fencing token, send, complete with the token.

CLAIM_EVENT = """UPDATE outbox_events
SET claim_token = claim_token + 1, locked_by = :me, lease_until = CAST(:now AS BIGINT) + :lease
WHERE event_id = (SELECT event_id FROM outbox_events
                  WHERE delivered = 0 AND (lease_until IS NULL OR lease_until <= :now)
                  ORDER BY created_at, event_id LIMIT 1)
  AND delivered = 0 AND (lease_until IS NULL OR lease_until <= :now)
RETURNING event_id, payload, claim_token"""
COMPLETE_WITH_TOKEN = """UPDATE outbox_events SET delivered = 1, delivered_at = :now, locked_by = NULL, lease_until = NULL
WHERE event_id = :id AND claim_token = :token"""
COMPLETE_BY_EVENT = """UPDATE outbox_events SET delivered = 1, delivered_at = :now, locked_by = NULL, lease_until = NULL
WHERE event_id = :id"""
RENEW_LEASE = """UPDATE outbox_events SET lease_until = CAST(:now AS BIGINT) + :lease
WHERE event_id = :id AND claim_token = :token AND delivered = 0 AND CAST(:now AS BIGINT) + :lease <= :deadline"""
RENEW_PAST_DEADLINE = """UPDATE outbox_events SET lease_until = CAST(:now AS BIGINT) + :lease
WHERE event_id = :id AND claim_token = :token AND delivered = 0"""
GIVE_BACK = """UPDATE outbox_events SET locked_by = NULL, lease_until = NULL
WHERE event_id = :id AND claim_token = :token AND delivered = 0"""


class Relay:
    """The fenced relay; the heartbeat relay adds renewals while it works."""

    def __init__(self, lab, mistake):
        self.lab, self.mistake = lab, mistake
        self.terminated = False

    def claim(self):
        def body(lab):
            rows = lab.query(CLAIM_EVENT, me=lab.me(), now=lab.tick, lease=lab.setting("lease_ms"))
            return rows[0] if len(rows) == 1 else None

        return in_transaction(self.lab, body)

    def send(self, event_id, payload):
        while True:
            try:
                self.lab.ask({"op": "send", "event_id": event_id, "payload": payload})
                return
            except LabError as err:
                if err.kind != "broker_unavailable":
                    tolerate(err)
                    return
            if self.lab.wait(IDLE_MS):
                return

    def complete(self, event_id, token):
        statement = COMPLETE_BY_EVENT if self.mistake == "no-token" else COMPLETE_WITH_TOKEN

        def body(lab):
            return True if lab.execute(statement, id=event_id, token=token, now=lab.tick) == 1 else None

        in_transaction(self.lab, body)

    def run(self):
        while True:
            claimed = self.claim()
            if claimed is None:
                if self.lab.wait(IDLE_MS):
                    return
                continue
            event_id, payload, token = claimed
            if self.mistake == "complete-before-send":
                self.complete(event_id, token)
                self.send(event_id, payload)
                continue
            self.send(event_id, payload)
            self.complete(event_id, token)


class Heartbeat(Relay):
    """The heartbeat relay: an event's work outlasts the lease."""

    def __init__(self, lab, mistake):
        super().__init__(lab, mistake)
        if mistake != "ignore-sigterm":
            signal.signal(signal.SIGTERM, self.on_sigterm)

    def on_sigterm(self, signum, frame):
        self.terminated = True

    def renew(self, event_id, token, deadline):
        def body(lab):
            if self.mistake == "no-deadline":
                return lab.execute(RENEW_PAST_DEADLINE, id=event_id, token=token, now=lab.tick, lease=lab.setting("lease_ms"))
            return lab.execute(RENEW_LEASE, id=event_id, token=token, now=lab.tick, lease=lab.setting("lease_ms"),
                               deadline=deadline)

        return in_transaction(self.lab, body) == 1

    def give_back(self, event_id, token):
        in_transaction(self.lab, lambda lab: lab.execute(GIVE_BACK, id=event_id, token=token) >= 0)

    def run(self):
        while not self.terminated:
            claimed = self.claim()
            if claimed is None:
                if self.lab.wait(IDLE_MS):
                    return
                continue
            event_id, payload, token = claimed
            # The claim's processing deadline, from the tick it was taken at;
            # the event's work, from its payload where it names its own.
            deadline = self.lab.tick + self.lab.setting("max_processing_ms")
            work_ms = json.loads(payload).get("work_ms", self.lab.setting("work_ms"))
            done, lost = 0, False
            while done < work_ms:
                if self.terminated:
                    self.give_back(event_id, token)
                    return
                if (self.mistake != "no-renew" and not self.renew(event_id, token, deadline)
                        and self.mistake != "renew-without-stopping"):
                    lost = True  # taken over (another relay works, sends, completes) or past its deadline
                    break
                self.lab.ask({"op": "work", "key": event_id, "ms": CHUNK_MS})
                done += CHUNK_MS
            if lost:
                continue
            self.send(event_id, payload)
            self.complete(event_id, token)


# The inbox consumer: an effect at most once, however often it is delivered.

RECORD_IN_INBOX = """INSERT INTO consumed_events (consumer, event_id, consumed_at) VALUES (:service, :event, :now)
ON CONFLICT (consumer, event_id) DO NOTHING"""
CREDIT_ACCOUNT = "UPDATE accounts SET credit_cents = credit_cents + :amount WHERE id = :account"


def inbox_consumer(lab, mistake):
    service = lab.setting("service")

    def ack(offer):
        try:
            lab.ask({"op": "ack", "offer": offer})
        except LabError as err:
            tolerate(err)  # not taken, or lost: the redelivery finds the event in the inbox

    while True:
        delivery = lab.ask({"op": "receive"}).get("delivery")
        if delivery is None:
            if lab.wait(IDLE_MS):
                return
            continue
        credit = json.loads(delivery["payload"])
        if mistake == "ack-before-effect":
            ack(delivery["offer"])

        def apply(lab):
            recorded = lab.execute(RECORD_IN_INBOX, service=service, event=delivery["event_id"], now=lab.now)
            if recorded == 1 or mistake == "no-dedup":
                lab.execute(CREDIT_ACCOUNT, amount=credit["amountCents"], account=credit["account"])
            return True

        applied = in_transaction(lab, apply)
        if applied and mistake != "ack-before-effect":
            ack(delivery["offer"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mistake", default="", help="make a known mistake on purpose: " + ", ".join(sorted(MISTAKES)))
    args = parser.parse_args()
    if args.mistake and args.mistake not in MISTAKES:
        print("relay.py: unknown mistake %r; the mistakes are %s" % (args.mistake, ", ".join(sorted(MISTAKES))), file=sys.stderr)
        sys.exit(2)
    if args.mistake != "ignore-sigterm":
        # Until a relay installs its own handler, SIGTERM ends it cleanly.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    lab = Lab()
    challenge = lab.hello["challenge"]
    if challenge == "day15-worker":
        day15_worker(lab, args.mistake)
    elif challenge == "fenced-relay":
        Relay(lab, args.mistake).run()
    elif challenge == "heartbeat-relay":
        Heartbeat(lab, args.mistake).run()
    elif challenge == "inbox-consumer":
        inbox_consumer(lab, args.mistake)
    else:
        print("relay.py: no relay for challenge %r" % challenge, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
