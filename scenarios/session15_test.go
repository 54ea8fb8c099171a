package scenarios

import (
	"testing"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// TestCustomClaimNamed: --claim-sql's statements are named for the report,
// each in place of the lesson's statement it replaces, as the file's
// check split them.
func TestCustomClaimNamed(t *testing.T) {
	t.Parallel()
	claim, err := LookupExercise("claim")
	if err != nil {
		t.Fatal(err)
	}
	sub := claim.Submit("mine.sql", store.SlotFile{Texts: []string{"SELECT 1", "UPDATE x SET y = 1 WHERE Id = :id"}})
	set := lesson.StatementSet(&lesson.Env{Options: lesson.Options{Submission: sub}}, store.OutboxLesson).Claim
	if set.SelectNext.Name != "your claim: select (from mine.sql)" || set.Update.Name != "your claim: update (from mine.sql)" || set.Split() {
		t.Fatalf("claim = %+v", set)
	}
	if set.SelectNext.SQL != "SELECT 1" || set.SelectNext.Replaces.Name != store.ClaimSelectNext.Name {
		t.Fatalf("select = %+v, want the file's statement as it was checked, in place of the lesson's", set.SelectNext)
	}
}
