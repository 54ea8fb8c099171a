package explorer

import (
	"github.com/outboxlab/outboxlab/lesson"
)

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{Elsewhere: "TestProcessesExplore"}
