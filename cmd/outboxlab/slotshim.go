package main

import (
	"context"
	"fmt"

	"github.com/outboxlab/outboxlab/store"
)

// loadSlotFile: SHIM until the sandbox branch lands (no check yet).
func loadSlotFile(_ context.Context, slot store.Slot, path string, _ bool) (store.SlotFile, error) {
	b, err := readRegularFile(path, store.MaxClaimFileSize)
	if err != nil {
		return store.SlotFile{}, fmt.Errorf("%w: %w", errUnreadable, err)
	}
	stmts, err := store.SplitStatements(string(b))
	if err != nil {
		return store.SlotFile{}, err
	}
	f := store.SlotFile{Slot: slot}
	for _, s := range stmts {
		f.Texts = append(f.Texts, s.Code)
	}
	return f, nil
}
