package session18expiry

import (
	"context"
	"fmt"
	"strings"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds how session 18 reads its figures off the run and words
// its verdict from them.

// leaseExpiryAfterSendVerdict words the run from its checks, figures and
// cast.
func leaseExpiryAfterSendVerdict(r *lab.Result, env *lesson.Env) string {
	m, rows := lesson.MetricsOf(r), lesson.RowsOf(r)
	if r.Passed() {
		return r.Fill(fmt.Sprintf("SAFE DESIGN held, with an honest duplicate: the broker holds %s offers of {@event} after "+
			"{@stale_relay}'s lease expired post-send; {@stale_relay}'s stale completion changed %s and the row was published "+
			"by {@publisher}'s completion; {@stale_receiver}'s late ack with a stale receipt changed %s and "+
			"{@redelivery_receiver}'s ack of the redelivery changed %s; the inbox consumer ended at %s cents with %s, "+
			"while the naive consumer, fed the same offers, ended at %s.",
			m("broker_offers"), rows("stale_completion_rows"), rows("stale_receipt_ack_rows"), rows("redelivery_ack_rows"),
			m("inbox_credit_cents"), lesson.CountOf(r, "consumed_event_rows", "consumed_events row", "consumed_events rows"), m("naive_credit_cents")))
	}
	var extra []string
	if dropped, _ := r.Metric("broker_dropped_offers"); dropped > 0 {
		extra = append(extra, r.Fill(fmt.Sprintf("The window hid the duplicate, it did not fix it: the broker's {broker_window} "+
			"window dropped %s of {@event} (sent by {@dropped_sender}) and accepted %s, so the naive consumer looks "+
			"correct here (%s cents for one award of %s); a replay after the window gets through (session 20).",
			lesson.CountOf(r, "broker_dropped_offers", "send", "sends"), m("broker_offers"), m("naive_credit_cents"), m("award_cents"))))
	}
	if stale, ok := r.Metric("publisher_token"); ok && stale != 0 && stale != measuredOr(r, "current_token", -1) {
		extra = append(extra, r.Fill(fmt.Sprintf("The row was published by {@publisher}'s completion under token %s, not "+
			"the current token %s: a relay whose lease had expired decided the row's state.", m("publisher_token"), m("current_token"))))
	}
	if env.Variant == "" {
		extra = append([]string{fmt.Sprintf("NOT SHOWN: the design did not hold this run; failed checks %v.", r.FailedChecks())}, extra...)
	}
	return strings.Join(extra, " ") // lesson.Execute opens a variant's verdict with what its checks measured
}

// measuredOr is key's measured value, or fallback when the run did not
// measure it.
func measuredOr(r *lab.Result, key string, fallback float64) float64 {
	if v, ok := r.Metric(key); ok {
		return v
	}
	return fallback
}

// measureLeaseExpiryAfterSend takes session 18's figures, in the lesson's
// order: counts from the database, the completions' rows from the
// completion ledger, the late ack's from the acknowledgement ledger.
func measureLeaseExpiryAfterSend(ctx context.Context, p *cast.Pipeline, late staleReceipt, r *lab.Result) error {
	count := func(key, query string, args ...any) error {
		n, err := p.Count(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("measure %s: %w", key, err)
		}
		r.SetMetric(key, float64(n))
		return nil
	}
	offers := func(key string, dropped bool) error { // read from the broker's own record, through its seam
		n, err := p.Broker().CountOffers(ctx, e42, dropped)
		if err != nil {
			return fmt.Errorf("measure %s: %w", key, err)
		}
		r.SetMetric(key, float64(n))
		return nil
	}
	if err := offers("broker_offers", false); err != nil {
		return err
	}
	if rows, ok := p.CompletionRows(cast.RelayA, e42); ok {
		r.SetMetric("stale_completion_rows", float64(rows))
	}
	for _, c := range []struct {
		key, query string
		args       []any
	}{
		{"published", store.CountDeliveredEvents.SQL, nil},
		{"inbox_credit_cents", store.AccountCredit.SQL, []any{cast.AccountID(inboxConsumer, account42)}},
		{"consumed_event_rows", store.CountConsumedEvents.SQL, []any{inboxConsumer}},
		{"naive_credit_cents", store.AccountCredit.SQL, []any{cast.AccountID(naiveConsumer, account42)}},
	} {
		if err := count(c.key, c.query, c.args...); err != nil {
			return err
		}
	}
	if err := offers("broker_dropped_offers", true); err != nil {
		return err
	}
	if rows, ok := p.CompletionRows(cast.RelayB, e42); ok {
		r.SetMetric("current_completion_rows", float64(rows))
	}
	if rows, ok := p.AckRows(late.staleHolder, late.offer, late.stale); ok && late.stale != 0 {
		r.SetMetric("stale_receipt_ack_rows", float64(rows))
	}
	if rows, ok := p.AckRows(late.redeliveryHolder, late.offer, late.redelivery); ok && late.redelivery != 0 {
		r.SetMetric("redelivery_ack_rows", float64(rows))
	}
	return nil
}
