package session20inbox

// This file holds session 20's figures and words: what the three parts
// measured, what the flags make the lab expect, and the verdict.

import (
	"fmt"
	"strings"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
)

// measureRetention sets session 20's figures from the three parts' outcomes
// and the flags.
func measureRetention(r *lab.Result, f retentionFlags, outs map[string]retentionOutcome) {
	r.SetMetric("credit_short_retention_cents", float64(outs["part 1 short"].credit))
	r.SetMetric("credit_long_retention_cents", float64(outs["part 1 long"].credit))
	r.SetMetric("broker_dropped_within_window", float64(outs["part 2"].droppedBefore))
	r.SetMetric("broker_passed_after_window", float64(outs["part 2"].passedAtReplay))
	r.SetMetric("credit_broker_window_cents", float64(outs["part 2"].credit))
	r.SetMetric("inbox_rows_purged_short_retention", float64(outs["part 1 short"].inboxPurged))
	r.SetMetric("inbox_rows_purged_long_retention", float64(outs["part 1 long"].inboxPurged))
	r.SetMetric("inbox_retention_ms", float64(f.short))
	r.SetMetric("long_inbox_retention_ms", float64(f.long))
	r.SetMetric("dlq_retention_ms", float64(f.dlq))
	r.SetMetric("broker_window_ms", float64(f.window))
}

// expectedFigure is one check's expected value and the rule it follows from.
type expectedFigure struct {
	check string
	rule  string // the rule, in words
	here  string // the rule applied to this run's flags
	want  float64
}

// expectedRetentionFigures states what the lab must measure with these
// flags: with the defaults the lesson's figures (s20LessonFigures).
func expectedRetentionFigures(f retentionFlags) []expectedFigure {
	age := s20ReplayAt - s20ConsumeAt // the dedup record's age at the replay
	sinceSend := s20ReplayAt - s20SendAt
	replayable := f.dlq > s20ReplayDelay
	yes := map[bool]string{true: "yes", false: "no"}
	twice := func(again bool) float64 { return float64(s20Credit) * (1 + lab.Bool(again)) }
	return []expectedFigure{
		{check: "credit_short_retention_cents",
			rule: fmt.Sprintf("%d when the DLQ still holds the message at the replay (DLQ retention > %s) and the inbox record is gone "+
				"(inbox retention <= its age at the replay, %s); otherwise %d", 2*s20Credit, cast.DurationText(s20ReplayDelay), cast.DurationText(age), s20Credit),
			here: fmt.Sprintf("DLQ %s > %s: %s; inbox %s <= %s: %s", cast.DurationText(f.dlq), cast.DurationText(s20ReplayDelay), yes[replayable],
				cast.DurationText(f.short), cast.DurationText(age), yes[f.short <= age]),
			want: twice(replayable && f.short <= age)},
		{check: "credit_long_retention_cents",
			rule: fmt.Sprintf("the same rule with the long inbox retention (the DLQ retention + %d deliveries × %s, or the inbox flag if that is longer)",
				s20MaxDeliveries, cast.DurationText(cast.VisibilityTimeout)),
			here: fmt.Sprintf("DLQ %s > %s: %s; inbox %s <= %s: %s", cast.DurationText(f.dlq), cast.DurationText(s20ReplayDelay), yes[replayable],
				cast.DurationText(f.long), cast.DurationText(age), yes[f.long <= age]),
			want: twice(replayable && f.long <= age)},
		{check: "broker_dropped_within_window",
			rule: fmt.Sprintf("1 when the broker window is longer than the %s between the send and the resend; otherwise 0", cast.DurationText(s20ResendGap)),
			here: fmt.Sprintf("window %s > %s: %s", cast.WindowText(f.window), cast.DurationText(s20ResendGap), yes[f.window > s20ResendGap]),
			want: lab.Bool(f.window > s20ResendGap)},
		{check: "broker_passed_after_window",
			rule: fmt.Sprintf("1 when the DLQ still holds the message at the replay and the window is not longer than the %s between the first send and the replay; otherwise 0",
				cast.DurationText(sinceSend)),
			here: fmt.Sprintf("DLQ %s > %s: %s; window %s <= %s: %s", cast.DurationText(f.dlq), cast.DurationText(s20ReplayDelay), yes[replayable],
				cast.WindowText(f.window), cast.DurationText(sinceSend), yes[f.window <= sinceSend]),
			want: lab.Bool(replayable && f.window <= sinceSend)},
		{check: "credit_broker_window_cents",
			rule: fmt.Sprint(s20Credit) + " with any flags: part 2 runs with the long inbox retention, so whatever the broker window drops or passes " +
				"(the resend, the replay), the inbox applies the event once",
			here: fmt.Sprintf("inbox %s covers the replay: %d", cast.DurationText(f.long), s20Credit),
			want: float64(s20Credit)},
	}
}

func expectedTable(expected []expectedFigure) lab.Table {
	t := lab.Table{Title: "Expected values: how each follows from the flags",
		Note:    "With the default flags (" + defaultRetentionFlags() + ") these are the lesson's figures; other flags change what the lab must measure.",
		Columns: []string{"Check", "Rule", "With these flags", "Expected", "Lesson figure"}}
	for _, e := range expected {
		t.AddRow(e.check, e.rule, e.here, e.want, s20LessonFigures[e.check])
	}
	return t
}

// retentionVerdict words the run from its measurements: which part of the
// lesson was reproduced, and which was not.
func retentionVerdict(r *lab.Result, env *lesson.Env, f retentionFlags, outs map[string]retentionOutcome) string {
	short, long, part2 := outs["part 1 short"], outs["part 1 long"], outs["part 2"]
	m := lesson.MetricsOf(r)
	lessonShown := true
	for key, want := range s20LessonFigures {
		if got, ok := r.Metric(key); !ok || got != want {
			lessonShown = false
		}
	}

	part1 := "Part 1, short retention: " + replaySentence(f.short, f.dlq, short) + "."
	if !short.replayApplied {
		part1 += " The short-retention breakage was not reproduced."
	}
	part1 += " Part 1, long retention: " + replaySentence(f.long, f.dlq, long) + "."
	if long.replayApplied {
		part1 += " Even the long retention did not keep the replay single."
	}
	part2Text := "Part 2: the broker window (" + cast.WindowText(f.window) + ") "
	if part2.droppedBefore > 0 {
		part2Text += fmt.Sprintf("dropped %d resend %s after the first send", part2.droppedBefore, cast.DurationText(s20ResendGap))
	} else {
		part2Text += fmt.Sprintf("let the resend %s after the first send through (nothing dropped), so the within-window drop was not reproduced", cast.DurationText(s20ResendGap))
	}
	switch {
	case part2.passedAtReplay > 0 && part2.replayApplied:
		part2Text += fmt.Sprintf("; %s passed the broker (%d offer) and was applied again", replayLater, part2.passedAtReplay)
	case part2.passedAtReplay > 0 && part2.credit == s20Credit:
		part2Text += fmt.Sprintf("; %s passed the broker (%d offer) and only the inbox kept it single", replayLater, part2.passedAtReplay)
	case part2.passedAtReplay > 0:
		part2Text += fmt.Sprintf("; %s passed the broker (%d offer) and the inbox turned it away, yet the effect is not single: "+
			"a duplicate delivered before the replay was applied as a new event", replayLater, part2.passedAtReplay)
	case part2.replayed && part2.replayDropped:
		part2Text += "; the window also dropped " + replayLater + " (it outlasts it), so the replay-passes-the-broker part was not reproduced"
	default:
		part2Text += fmt.Sprintf("; nothing was replayed, because the DLQ retention of %s purged the message first, so the replay-passes-the-broker part was not reproduced",
			cast.DurationText(f.dlq))
	}
	parts := part1 + " " + part2Text + " (" + effectsText(part2.credit) + ")."

	switch {
	case !r.Passed() && env.Variant != "":
		return parts
	case !r.Passed():
		return fmt.Sprintf("NOT SHOWN: the design did not hold this run; failed checks %v (credits %s and %s cents, %s dropped, %s passed). %s", r.FailedChecks(),
			m("credit_short_retention_cents"), m("credit_long_retention_cents"), m("broker_dropped_within_window"), m("broker_passed_after_window"), parts)
	case lessonShown:
		return "SAFE DESIGN held within its window, and the window's edge was shown. " + parts
	default:
		return "The measurements match what these flags predict, but the lesson was only partly reproduced. " + parts +
			" The default flags (" + defaultRetentionFlags() + ") reproduce all of it."
	}
}

// effectsText words a part's credit as the number of effects it holds, so
// no sentence can call a doubled credit single.
func effectsText(credit int64) string {
	switch {
	case credit == s20Credit:
		return fmt.Sprintf("credit %d cents: one effect", credit)
	case credit%s20Credit == 0:
		return fmt.Sprintf("credit %d cents: the %d-cent event applied %d times", credit, s20Credit, credit/s20Credit)
	default:
		return fmt.Sprintf("credit %d cents, for one %d-cent event", credit, s20Credit)
	}
}

// replaySentence says what happened to one part's replay, and
// the credit the part ended with.
func replaySentence(retention, dlq int64, o retentionOutcome) string {
	age := o.replayAt - o.consumedAt
	with := "with an inbox retention of " + cast.DurationText(retention)
	credit := " (" + effectsText(o.credit) + ")"
	switch {
	case !o.replayed:
		return fmt.Sprintf("%s nothing was replayed, because the DLQ retention of %s purged the message first%s", with, cast.DurationText(dlq), credit)
	case o.replayDropped:
		return fmt.Sprintf("%s the broker window dropped the replay%s", with, credit)
	case o.replayApplied && o.inboxPurged > 0:
		return fmt.Sprintf("%s, not longer than the dedup record's age of %s at the replay, the record was purged and the replay was applied again%s",
			with, cast.DurationText(age), credit)
	case o.replayApplied:
		return fmt.Sprintf("%s the replay was applied again: no dedup record held it back%s", with, credit)
	default:
		return fmt.Sprintf("%s, longer than the dedup record's age of %s at the replay, the replay was deduplicated%s", with, cast.DurationText(age), credit)
	}
}

// replayLater names the operator's replay by its delay after the
// dead-lettering, as the script runs it.
var replayLater = "the replay " + cast.DurationText(s20ReplayDelay) + " after the dead-lettering"

// defaultRetentionFlags are session 20's flags as the default options set
// them, written as the command line takes them.
func defaultRetentionFlags() string {
	f := flagsOf(lesson.DefaultOptions())
	return fmt.Sprintf("--inbox-retention %s --dlq-retention %s --broker-window %s",
		cast.DurationText(f.short), cast.DurationText(f.dlq), cast.WindowText(f.window))
}

// s20LessonFigureOrder is the order of the checks, in which the lesson's
// texts list its figures.
var s20LessonFigureOrder = []string{"credit_short_retention_cents", "credit_long_retention_cents",
	"broker_dropped_within_window", "broker_passed_after_window", "credit_broker_window_cents"}

// lessonFiguresText is the lesson's figures (s20LessonFigures) in the
// order of the checks: what the default flags make the lab expect.
func lessonFiguresText() string {
	var figures []string
	for _, key := range s20LessonFigureOrder {
		figures = append(figures, lab.FormatNumber(s20LessonFigures[key]))
	}
	return strings.Join(figures[:len(figures)-1], ", ") + " and " + figures[len(figures)-1]
}

// retentionSettings are the settings session 20's texts quote, as opts
// set them: the three flags and the long retention derived from them, and
// the script's own periods (the replay's delay, the resend's gap, the
// visibility timeout, the deliveries before the DLQ). A run records the
// periods it measured in their place (see [castRetention]).
func retentionSettings(opts lesson.Options) map[string]string {
	f := flagsOf(opts)
	return map[string]string{
		"inbox_retention": cast.DurationText(f.short), "dlq_retention": cast.DurationText(f.dlq), "broker_name": lesson.BrokerName(opts),
		"broker_window": cast.WindowText(f.window), "long_inbox_retention": cast.DurationText(f.long),
		"redelivery_span": cast.DurationText(f.redeliverySpan()),
		"replay_delay":    cast.DurationText(s20ReplayDelay), "resend_gap": cast.DurationText(s20ResendGap),
		"replay_since_send": cast.DurationText(s20ReplayAt - s20SendAt), "consume_at": cast.DurationText(s20ConsumeAt),
		"consume_clock":      cast.LessonTicks.Clock(s20ConsumeAt),
		"visibility_timeout": cast.DurationText(cast.VisibilityTimeout), "max_deliveries": fmt.Sprint(s20MaxDeliveries),
		"lesson_figures": lessonFiguresText(), "tick_epoch": cast.LessonStart.Format("2006-01-02T15:04:05.000Z"),
	}
}
