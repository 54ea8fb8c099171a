package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ackAnswer is the ack exercise's key, as a student who got it right
// hands it in; ackByID drops the token guard and fails.
const (
	ackAnswer = "UPDATE outbox_events\nSET delivered = 1, delivered_at = :now\nWHERE event_id = :id\n  AND claim_token = :token\n  AND delivered = 0\n"
	ackByID   = "UPDATE outbox_events SET delivered = 1, delivered_at = :now WHERE event_id = :id\n"
)

// workingFolder is the name of the folder the tests run in.
func workingFolder(t *testing.T) string {
	t.Helper()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Base(cwd)
}

func TestStudentNames(t *testing.T) {
	t.Parallel()
	here := workingFolder(t)
	for _, tt := range []struct {
		name  string
		how   string
		files []string
		want  []string
	}{
		{"CourseSiteDownload", studentAuto, []string{"submissions/alice/ack.sql", "submissions/bob/ack.sql"}, []string{"alice", "bob"}},
		{"FoldersWithOtherNames", studentAuto, []string{"submissions/alice/ack.sql", "submissions/bob/answer.sql"}, []string{"alice", "bob"}},
		{"TwoFilesOfOneStudent", studentAuto, []string{"s/alice/ack.sql", "s/alice/ack-v2.sql", "s/bob/ack.sql"}, []string{"alice", "alice", "bob"}},
		{"OneStudentRegraded", studentAuto, []string{"submissions/alice/ack.sql"}, []string{"alice"}},
		{"FlatFolder", studentAuto, []string{"submissions/alice.sql", "submissions/bob.sql"}, []string{"alice", "bob"}},
		{"OneFileNotNamedAfterExercise", studentAuto, []string{"examples/claim-lesson.sql"}, []string{"claim-lesson"}},
		{"InTheWorkingFolder", studentAuto, []string{"ack.sql"}, []string{here}},
		{"ForcedFolder", studentFolder, []string{"submissions/alice.sql", "submissions/bob.sql"}, []string{"submissions", "submissions"}},
		{"ForcedFile", studentFile, []string{"submissions/alice/ack.sql", "submissions/bob/ack.sql"}, []string{"ack", "ack"}},
		{"RootFolderFallsBackToFile", studentFolder, []string{"/ack.sql"}, []string{"ack"}},
		{"ControlCharactersEscaped", studentAuto, []string{"s/al\x1b[2Jice/ack.sql", "s/b\xffob/ack.sql", "s/../ack.sql"}, []string{"al_[2Jice", "b_ob", here}},
		{"EmptyStemFallsBackToExercise", studentFile, []string{"s/.sql"}, []string{"ack"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := studentNames(tt.files, "ack", tt.how); !slices.Equal(got, tt.want) {
				t.Errorf("studentNames(%q, %s) = %q, want %q", tt.files, tt.how, got, tt.want)
			}
		})
	}
}

// writeSubmissions writes each "student/file" of files under a fresh
// submissions folder and returns the paths, in the order given.
func writeSubmissions(t *testing.T, files [][2]string) []string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "submissions")
	var paths []string
	for _, f := range files {
		p := filepath.Join(root, f[0])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f[1]), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// TestGradeStudentFolders: submissions/*/*.sql is graded by student:
// the table, the JSON and each report name the student, the reports go
// under --out/ack/STUDENT/, two files of one student get a report each,
// and a second grade into the same --out files new reports beside the
// first, overwriting none.
func TestGradeStudentFolders(t *testing.T) {
	t.Parallel()
	paths := writeSubmissions(t, [][2]string{{"alice/ack.sql", ackAnswer}, {"alice/ack-late.sql", ackAnswer}, {"bob/ack.sql", ackByID}})
	out := filepath.Join(t.TempDir(), "reports")
	o := runCLI(t, append([]string{"grade", "--exercise", "ack", "--bound", "3", "--out", out}, paths...)...)
	if o.code != exitCheckFailed {
		t.Fatalf("exit %d, want 1; stdout %s stderr %s", o.code, o.stdout, o.stderr)
	}
	for _, want := range []string{"| Student", "| alice", "| bob", "stale_ack_rows"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, o.stdout)
		}
	}
	o = runCLI(t, append([]string{"grade", "--exercise", "ack", "--bound", "3", "--format", "json", "--out", out}, paths...)...)
	gs := gradesOf(t, o.stdout)
	if len(gs) != len(paths) {
		t.Fatalf("%d JSON lines, want %d:\n%s", len(gs), len(paths), o.stdout)
	}
	for i, want := range []struct{ student, source, verdict string }{
		{"alice", "ack.sql", "HELD"}, {"alice", "ack-late.sql", "HELD"}, {"bob", "ack.sql", "FAILED"},
	} {
		g := gs[i]
		if g.Student != want.student || g.Exercise != "ack" || g.File != paths[i] {
			t.Errorf("line %d: student %q, exercise %q, file %q; want %s, ack, %s", i, g.Student, g.Exercise, g.File, want.student, paths[i])
			continue
		}
		if folder := filepath.Join(out, "ack", want.student, "Session-16"); filepath.Dir(g.Report) != folder {
			t.Errorf("%s: report %s, want it in %s", paths[i], g.Report, folder)
		}
		b, err := os.ReadFile(g.Report)
		if err != nil {
			t.Fatal(err)
		}
		if w := "YOUR ACK " + want.verdict + " (" + want.student + ", from " + want.source + ")"; !strings.Contains(string(b), w) {
			t.Errorf("%s's report does not say %q", paths[i], w)
		}
	}
	// Two grades of alice's two files and bob's one: every report kept.
	for student, n := range map[string]int{"alice": 4, "bob": 2} {
		for _, lesson := range []string{"Session-16", "Explore"} {
			reps, _ := filepath.Glob(filepath.Join(out, "ack", student, lesson, "*YourSQL*.txt"))
			if len(reps) != n {
				t.Errorf("%s: %d %s reports, want %d: %v", student, len(reps), lesson, n, reps)
			}
		}
	}
}

// TestGradeHTML: grade --html writes each student's pages beside their
// reports, under --out/ack/STUDENT/, each naming its student only.
func TestGradeHTML(t *testing.T) {
	t.Parallel()
	paths := writeSubmissions(t, [][2]string{{"alice/ack.sql", ackAnswer}, {"bob/ack.sql", ackByID}})
	out := filepath.Join(t.TempDir(), "reports")
	o := runCLI(t, append([]string{"grade", "--exercise", "ack", "--bound", "3", "--html", "--format", "json", "--out", out}, paths...)...)
	if o.code != exitCheckFailed {
		t.Fatalf("exit %d, want 1; stderr %s", o.code, o.stderr)
	}
	for _, g := range gradesOf(t, o.stdout) {
		other := map[string]string{"alice": "bob", "bob": "alice"}[g.Student]
		for report, page := range map[string]string{g.Report: g.Page, g.ExploreReport: g.ExplorePage} {
			if page == "" || filepath.Dir(page) != filepath.Dir(report) || !strings.HasPrefix(page, filepath.Join(out, "ack", g.Student)+string(filepath.Separator)) {
				t.Errorf("%s: page %q beside report %q", g.Student, page, report)
				continue
			}
			b, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "("+g.Student+", from ack.sql)") || strings.Contains(string(b), other) {
				t.Errorf("%s: page %s does not name its student alone", g.Student, page)
			}
		}
	}
}

// TestGradeRefusesLinks: a symbolic link among the files (a download can
// hold one) is refused, so the grade never reads, quotes or reports the
// file it points to.
func TestGradeRefusesLinks(t *testing.T) {
	t.Parallel()
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("UPDATE outbox_events SET delivered = 1 WHERE event_id = 'TOPSECRET'"), 0o600); err != nil {
		t.Fatal(err)
	}
	paths := writeSubmissions(t, [][2]string{{"alice/ack.sql", ackAnswer}})
	link := filepath.Join(filepath.Dir(filepath.Dir(paths[0])), "mallory", "ack.sql")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "reports")
	o := runCLI(t, "grade", "--exercise", "ack", "--bound", "3", "--format", "csv", "--out", out, paths[0], link)
	if o.code != exitUsage {
		t.Errorf("exit %d, want 2; stderr %s", o.code, o.stderr)
	}
	if !strings.Contains(o.stdout, "mallory,ack,") || !strings.Contains(o.stdout, "refused") || !strings.Contains(o.stdout, "symbolic link") {
		t.Errorf("the gradebook does not refuse mallory's link:\n%s", o.stdout)
	}
	if strings.Contains(o.stdout+o.stderr, "TOPSECRET") {
		t.Errorf("the grade quoted the linked file:\n%s", o.stdout)
	}
	if reps, _ := filepath.Glob(filepath.Join(out, "ack", "mallory", "*", "*")); len(reps) > 0 {
		t.Errorf("reports were filed for the link: %v", reps)
	}
}

// TestRelayStudents: grade --challenge names each student's folder by
// its name, or by as much of its path as tells two folders of one name
// apart; a folder given twice, or again through a link, is refused.
func TestRelayStudents(t *testing.T) {
	t.Parallel()
	here := workingFolder(t)
	for _, tt := range []struct {
		name    string
		folders []string
		want    []string
	}{
		{"OneFolderEach", []string{"class/alice", "class/bob/"}, []string{"alice", "bob"}},
		{"TwoSectionsOneName", []string{"/c/section-a/alice", "/c/section-b/alice", "/c/section-b/bob"},
			[]string{"section-a_alice", "section-b_alice", "bob"}},
		{"SameNameDeeper", []string{"/x/2025/a/alice", "/x/2026/a/alice"}, []string{"2025_a_alice", "2026_a_alice"}},
		{"WholePathsReadTheSame", []string{"/s/a\x01", "/s/a\x02"}, []string{"s_a_", "s_a_-2"}},
		{"NumberedPastATakenName", []string{"/s/a\\b", "/s/a_b", "/t/s_a_b-2"}, []string{"s_a_b", "s_a_b-3", "s_a_b-2"}},
		{"WorkingFolder", []string{"."}, []string{here}},
		{"ControlCharactersEscaped", []string{"/s/al\x1b[2Jice"}, []string{"al_[2Jice"}},
		{"Root", []string{"/"}, []string{"student"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := relayStudents(tt.folders, "student")
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("relayStudents(%q) = %q, %v; want %q", tt.folders, got, err, tt.want)
			}
		})
	}
	if _, err := relayStudents([]string{"class/alice", "class/alice/", "class/../class/alice"}, "student"); err == nil ||
		!strings.Contains(err.Error(), "are one folder") {
		t.Errorf("a folder given twice: %v, want it refused", err)
	}
	class := t.TempDir()
	if err := os.Mkdir(filepath.Join(class, "bob"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(class, "bob"), filepath.Join(class, "boblink")); err != nil {
		t.Fatal(err)
	}
	if _, err := relayStudents([]string{filepath.Join(class, "bob"), filepath.Join(class, "boblink")}, "student"); err == nil ||
		!strings.Contains(err.Error(), "are one folder") {
		t.Errorf("a folder given again through a link: %v, want it refused", err)
	}
}
