package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// How grade names the student of each file (--student-from).
const (
	studentAuto   = "auto"   // by folder when the files are in several folders or all named after the exercise
	studentFolder = "folder" // the file's folder: submissions/alice/ack.sql is alice's
	studentFile   = "file"   // the file's name without its extension: submissions/alice.sql is alice's
)

// studentUsage is grade's help on how it names students.
const studentUsage = "Each file is one student's. By default (--student-from auto) the student is the file's\n" +
	"folder when the files given are in two or more folders or all named after the exercise\n" +
	"(submissions/alice/ack.sql and submissions/bob/ack.sql are alice's and bob's, the usual download from a\n" +
	"course site), else the file's name without its extension (submissions/alice.sql is alice's);\n" +
	"--student-from folder or file decides for every file. A student's reports go under\n" +
	"--out/EXERCISE/STUDENT/; two files of one student are two rows, and a report never overwrites another\n" +
	"(a second grade into the same --out files new ones beside the first)."

// studentNames names the student of each of files, answers to exercise,
// by how (studentAuto, studentFolder or studentFile). A folder that has no
// name of its own (the root) names the student by the file instead.
func studentNames(files []string, exercise, how string) []string {
	byFolder := how == studentFolder
	if how == studentAuto {
		folders := map[string]bool{}
		named := true // every file named after the exercise
		for _, f := range files {
			folders[folderOf(f)] = true
			named = named && fileStem(f) == exercise
		}
		byFolder = len(folders) > 1 || named
	}
	out := make([]string, len(files))
	for i, f := range files {
		name := fileStem(f)
		if byFolder {
			if folder := filepath.Base(folderOf(f)); folder != string(filepath.Separator) && folder != "." {
				name = folder
			}
		}
		out[i] = safeName(name, exercise)
	}
	return out
}

// folderOf is the absolute folder of file (as given, if it has none), so
// that ack.sql given from inside submissions/alice is alice's.
func folderOf(file string) string {
	if abs, err := filepath.Abs(file); err == nil {
		return filepath.Dir(abs)
	}
	return filepath.Dir(filepath.Clean(file))
}

// fileStem is file's name without its extension.
func fileStem(file string) string {
	return strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
}

// safeName makes name a folder name that is one line of text: a separator,
// a control or format character or a byte that is not UTF-8 becomes '_';
// a name that would be empty or a relative folder becomes fallback.
func safeName(name, fallback string) string {
	name = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return '_'
		}
		return r
	}, strings.ToValidUTF8(name, "\uFFFD"))
	if name == "" || name == "." || name == ".." {
		return fallback
	}
	return name
}

// relayStudents names the student of each of folders, for grade
// --challenge, where each folder is one student's: its name, made safe;
// where names are the same (section-a/alice, section-b/alice), each of
// them is named by more of its last folders, joined by '_', until the names
// differ (section-a_alice; a longer name may then meet another folder's,
// which grows too), and numbered where even their whole paths
// read the same (control characters made '_'). The working folder (".") is named as it is
// named in its parent. A folder given twice (or through a link) is an
// error.
func relayStudents(folders []string, fallback string) ([]string, error) {
	parts := make([][]string, len(folders))
	seen := map[string]string{}
	for i, f := range folders {
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, err
		}
		same := abs // a link to a folder given too is that folder
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			same = real
		}
		if first, ok := seen[same]; ok {
			return nil, fmt.Errorf("%s and %s are one folder: each student's folder is named once", first, f)
		}
		seen[same] = f
		parts[i] = strings.Split(strings.Trim(filepath.ToSlash(abs), "/"), "/")
	}
	names := make([]string, len(folders))
	depth := make([]int, len(folders))
	for i := range depth {
		depth[i] = 1
	}
	for {
		for i, p := range parts {
			names[i] = safeName(strings.Join(p[max(len(p)-depth[i], 0):], "_"), fallback)
		}
		grown := false
		byName := map[string][]int{}
		for i, n := range names {
			byName[n] = append(byName[n], i)
		}
		for _, same := range byName {
			if len(same) < 2 {
				continue
			}
			for _, i := range same {
				if depth[i] < len(parts[i]) {
					depth[i]++
					grown = true
				}
			}
		}
		if !grown {
			return numberTheSame(names), nil
		}
	}
}

// numberTheSame appends -2, -3, ... to the second and later of names
// that are still the same.
func numberTheSame(names []string) []string {
	taken := map[string]bool{}
	for _, n := range names {
		taken[n] = true
	}
	seen := map[string]bool{}
	for i, n := range names {
		if !seen[n] {
			seen[n] = true
			continue
		}
		k := 2
		for taken[fmt.Sprintf("%s-%d", n, k)] {
			k++
		}
		names[i] = fmt.Sprintf("%s-%d", n, k)
		taken[names[i]] = true
	}
	return names
}
