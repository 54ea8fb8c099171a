package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/outboxlab/outboxlab/scenarios"
)

// readClaimSQL reads an engineer's claim: a file with two statements
// separated by a semicolon, the SELECT that picks the oldest claimable
// message's Id and the UPDATE that takes message :id. Both may use the named
// parameters :now, :worker and :until; the UPDATE also gets :id.
func readClaimSQL(path string) (*scenarios.CustomClaim, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--claim-sql: cannot read %s: %v", path, unwrapPathError(err))
	}
	var stmts []string
	for _, part := range strings.Split(string(b), ";") {
		if hasSQL(part) {
			stmts = append(stmts, strings.TrimSpace(part))
		}
	}
	if len(stmts) != 2 {
		return nil, usagef("--claim-sql: %s must hold two statements separated by ';' (the SELECT of the next claimable Id, then the UPDATE of :id); found %d", path, len(stmts))
	}
	if !strings.HasPrefix(strings.ToUpper(firstWord(stmts[0])), "SELECT") || !strings.Contains(stmts[1], ":id") {
		return nil, usagef("--claim-sql: %s: the first statement must be a SELECT and the second must use :id", path)
	}
	return &scenarios.CustomClaim{Source: filepath.Base(path), Select: stmts[0], Update: stmts[1]}, nil
}

// hasSQL reports whether a chunk holds more than blank lines and -- comments.
func hasSQL(chunk string) bool {
	for _, line := range strings.Split(chunk, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "--") {
			return true
		}
	}
	return false
}

// firstWord returns the first word of a statement, skipping -- comment lines.
func firstWord(stmt string) string {
	for _, line := range strings.Split(stmt, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "--") {
			return strings.Fields(line)[0]
		}
	}
	return ""
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
