package reports

import (
	"fmt"

	"github.com/outboxlab/outboxlab/lab"
)

// refusalText says, of a write a guard turned away, which guard, as the
// lane view words it: "FENCED" for a token, else the guard's label; ""
// for any other event.
func refusalText(e raceEvent) string {
	switch {
	case e.Kind == lab.KindOffer && e.AckLost:
		return "the broker's ack LOST"
	case e.Kind != lab.KindFenced:
		return ""
	case e.Refusal == lab.RefusedByToken:
		return "FENCED by the token"
	}
	return refusalLabels[e.Refusal]
}

// guardGlyph is the mark of a write a guard other than a fencing token
// turned away, at (x, y): a hollow square, where a fence is a full one.
func guardGlyph(x, y float64) string {
	return fmt.Sprintf(`<rect class="guard-mark" x="%.1f" y="%.1f" width="12" height="12"/>`, x-6, y-6)
}

// glyph is the mark of an event of kind at (x, y): each kind its own,
// as the page's legend shows them.
func glyph(kind lab.Kind, x, y float64) string {
	switch kind {
	case lab.KindCrash:
		return fmt.Sprintf(`<g class="crash-marker"><path class="crash-mark" d="M%.1f,%.1f l14,14 m0,-14 l-14,14"/><path class="crash-mark inner" d="M%.1f,%.1f l14,14 m0,-14 l-14,14"/></g>`,
			x-7, y-7, x-7, y-7)
	case lab.KindFenced, lab.KindRefused:
		return fmt.Sprintf(`<rect class="fenced-mark" x="%.1f" y="%.1f" width="12" height="12"/>`, x-6, y-6)
	case lab.KindAckLost:
		return fmt.Sprintf(`<circle class="lost-mark" cx="%.1f" cy="%.1f" r="5.5"/>`, x, y)
	case lab.KindUnsent:
		return fmt.Sprintf(`<rect class="unsent-mark" x="%.1f" y="%.1f" width="12" height="12"/><text class="glyph-letter" x="%.1f" y="%.1f" text-anchor="middle">U</text>`, x-6, y-6, x, y+4)
	case lab.KindStale:
		return fmt.Sprintf(`<rect class="dot fenced-mark" x="%.1f" y="%.1f" width="12" height="12"/><text class="glyph-letter" x="%.1f" y="%.1f" text-anchor="middle">S</text>`, x-6, y-6, x, y+4)
	case lab.KindSteal:
		return fmt.Sprintf(`<path class="steal-mark" d="M%.1f,%.1f l7,12 h-14 z"/>`, x, y-7)
	case lab.KindNoOp:
		return fmt.Sprintf(`<circle class="noop-mark" cx="%.1f" cy="%.1f" r="5.5"/>`, x, y)
	case lab.KindDone:
		return fmt.Sprintf(`<circle class="done-mark" cx="%.1f" cy="%.1f" r="5.5"/><line class="done-mark" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, x, y, x-4, y, x+4, y)
	case lab.KindError:
		return fmt.Sprintf(`<path class="error-mark" d="M%.1f,%.1f l6,6 l-6,6 l-6,-6 z"/><text class="glyph-letter" x="%.1f" y="%.1f" text-anchor="middle">!</text>`, x, y-6, x, y+4)
	case lab.KindEffect, lab.KindDedup:
		return fmt.Sprintf(`<path class="dot" d="M%.1f,%.1f l6,6 l-6,6 l-6,-6 z"/>`, x, y-6)
	case lab.KindBlocked:
		return fmt.Sprintf(`<circle class="dot" cx="%.1f" cy="%.1f" r="5.5"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#b7791f" stroke-width="2"/>`, x, y, x-4, y+4, x+4, y-4)
	case lab.KindStall:
		return fmt.Sprintf(`<rect class="stall-mark" x="%.1f" y="%.1f" width="4" height="12"/><rect class="stall-mark" x="%.1f" y="%.1f" width="4" height="12"/>`, x-5, y-6, x+1, y-6)
	case lab.KindClaim, lab.KindFinalize, lab.KindRenew, lab.KindOffer:
		return fmt.Sprintf(`<circle class="dot" cx="%.1f" cy="%.1f" r="5"/>`, x, y)
	}
	return fmt.Sprintf(`<circle class="dot" cx="%.1f" cy="%.1f" r="3.5"/>`, x, y)
}
