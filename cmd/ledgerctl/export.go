package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

var cmdExport = &command{
	name:     "export",
	synopsis: "--since TIME [--until TIME] [--out FILE [--resume]] [--page-size N]",
	summary:  "export evidence as JSON Lines, resumable",
	help: `Writes evidence for every row last written in [--since, --until) as JSON
Lines: one line per row with its identity, state, content hash, dedupe
(idempotency) key, full history and whether its hash chain verifies. Lines
are in table order, not time order.

It streams through DynamoDB Scan pages filtered on updated_at, so its cost
follows the table. With --out, after each page is fully written and synced
the position is saved in FILE.checkpoint; after an interruption, run the same
command with --resume to truncate FILE to the last complete page and continue
from there, with no duplicate and no missing line. The checkpoint records
the window and table and is marked done when the export completes.

An item of the table that is not a ledger row (one that does not decode)
does not stop the export: it is left out, named on stderr as a finding
line (malformed-row ROW <key>: <why>), and the export goes on; it then
exits 1 once every other row is written.

TIME is RFC 3339 (2026-11-30T09:00:00Z) or a UTC date (2026-11-30).
--until defaults to now. A progress line is shown on stderr when it is a
terminal.

Exit status: 0 every row exported; 1 an item was not a ledger row (every
other row exported), or the export stopped; 2 usage.`,
	run: func(a *app, ctx context.Context, c *command, args []string) error {
		fs := a.flagSet(c.name)
		since := fs.String("since", "", "start of the window, inclusive: rows last written at or after `TIME` (required)")
		until := fs.String("until", "", "end of the window, exclusive: rows last written before `TIME` (default now)")
		out := fs.String("out", "", "write to `FILE` (with a checkpoint at FILE.checkpoint) instead of stdout")
		resume := fs.Bool("resume", false, "continue an interrupted export to --out from its checkpoint")
		pageSize := fs.Int("page-size", 500, "items DynamoDB evaluates per Scan page, and rows per checkpoint at most")
		if _, err := a.parse(c, fs, args, 0, 0); err != nil {
			return err
		}
		if *pageSize < 1 || *pageSize > 1_000_000 {
			return usagef(c, "--page-size must be between 1 and 1000000")
		}
		if *resume && *out == "" {
			return usagef(c, "--resume needs --out: only a file export has a checkpoint")
		}
		var w window
		var err error
		if *since == "" && !*resume {
			return usagef(c, "--since is required")
		}
		if *since != "" {
			if w.since, err = parseTime(*since); err != nil {
				return usagef(c, "--since: %v", err)
			}
		}
		w.until = a.now().UTC()
		if *until != "" {
			if w.until, err = parseTime(*until); err != nil {
				return usagef(c, "--until: %v", err)
			}
		}
		e := &exporter{a: a, pageSize: int32(*pageSize)}
		if e.sc, err = a.lenientScanner(ctx, e.malformed); err != nil {
			return err
		}
		if *out == "" {
			if !w.until.After(w.since) {
				return usagef(c, "--until must be after --since")
			}
			return e.toWriter(ctx, w, a.stdout)
		}
		return e.toFile(ctx, c, *out, *resume, w, *since != "", *until != "")
	},
}

type window struct{ since, until time.Time }

func parseTime(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither RFC 3339 (2026-11-30T09:00:00Z) nor a date (2026-11-30)", v)
}

// checkpoint is the resumable state of a file export, saved after each
// complete page.
type checkpoint struct {
	Format string `json:"format"`
	Table  string `json:"table"`
	Since  string `json:"since"`
	Until  string `json:"until"`
	// NextKey is the scan's last evaluated key: where the next page starts.
	NextKey string `json:"next_key"`
	// Offset is the length of the output file that holds complete pages.
	Offset int64 `json:"offset"`
	Rows   int64 `json:"rows"`
	Pages  int   `json:"pages"`
	// Malformed counts the items left out as not ledger rows.
	Malformed int64  `json:"malformed,omitempty"`
	Done      bool   `json:"done"`
	Saved     string `json:"saved_at"`
}

const checkpointFormat = "ledgerctl-export-checkpoint-v1"

type exporter struct {
	a        *app
	sc       *dynamostore.Scanner
	pageSize int32
	rows     int64
	pages    int
	bad      int64 // items left out as not ledger rows
}

// malformed reports an item that is not a ledger row on stderr (a finding
// line) and counts it; the export goes on without it.
func (e *exporter) malformed(item map[string]types.AttributeValue, err error) {
	e.bad++
	f := digest.Finding{Code: digest.CodeMalformedRow, Kind: digest.FindRow, Key: itemKey(item), Fail: true,
		Detail: fmt.Sprintf("the item is not a ledger row (%v): not exported", err)}
	fmt.Fprintln(e.a.stderr, f.String())
}

// complete is the end of an export: a failure if items were left out.
func (e *exporter) complete() error {
	if e.bad == 0 {
		return nil
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("export complete, but %d items are not ledger rows and were left out (named above)", e.bad)}
}

func (e *exporter) filter(w window) dynamostore.ScanFilter {
	return dynamostore.ScanFilter{UpdatedSince: w.since, UpdatedUntil: w.until, PageSize: e.pageSize}
}

// page scans one page into buf as JSON lines.
func (e *exporter) page(ctx context.Context, w window, start string, buf *bytes.Buffer) (next string, rows int, err error) {
	enc := json.NewEncoder(buf)
	next, err = e.sc.Page(ctx, start, e.filter(w), func(row ledger.Entry) error {
		rows++
		return enc.Encode(newRowView(row))
	})
	return next, rows, err
}

func (e *exporter) progress(done bool) {
	if !e.a.isTerminal(e.a.stderr) {
		return
	}
	fmt.Fprintf(e.a.stderr, "\rexport: %d rows written, %d pages scanned", e.rows, e.pages)
	if done {
		fmt.Fprintln(e.a.stderr)
	}
}

// interrupted explains how to continue an export that stopped early.
func interrupted(err error, resumable string) error {
	if resumable == "" {
		return fmt.Errorf("export stopped: %w", err)
	}
	return fmt.Errorf("export stopped (%w); %s", err, resumable)
}

// toWriter streams the export to w without a checkpoint.
func (e *exporter) toWriter(ctx context.Context, win window, w io.Writer) error {
	start := ""
	for {
		var buf bytes.Buffer
		next, n, err := e.page(ctx, win, start, &buf)
		if err != nil {
			return interrupted(err, "")
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return fmt.Errorf("export: write: %w", err)
		}
		e.rows += int64(n)
		e.pages++
		e.progress(next == "")
		if next == "" {
			fmt.Fprintf(e.a.stderr, "export: %d rows\n", e.rows)
			return e.complete()
		}
		if e.a.afterPage != nil {
			if err := e.a.afterPage(e.pages); err != nil {
				return err
			}
		}
		start = next
	}
}

// toFile runs or resumes an export to path with a checkpoint beside it.
func (e *exporter) toFile(ctx context.Context, c *command, path string, resume bool, win window, sinceSet, untilSet bool) error {
	cpPath := path + ".checkpoint"
	var (
		f    *os.File
		cp   checkpoint
		done bool
		err  error
	)
	if resume {
		f, cp, win, done, err = e.resumeFile(c, path, cpPath, win, sinceSet, untilSet)
	} else {
		f, cp, err = e.startFile(c, path, cpPath, win)
	}
	if err != nil || done {
		return err
	}
	defer f.Close()
	return e.pagesToFile(ctx, f, path, cpPath, cp, win)
}

// readCheckpoint reads the checkpoint at cpPath and the window it records.
func readCheckpoint(cpPath string) (checkpoint, window, error) {
	var cp checkpoint
	b, err := os.ReadFile(cpPath)
	if errors.Is(err, fs.ErrNotExist) {
		return cp, window{}, fmt.Errorf("export: nothing to resume: no checkpoint at %s (run without --resume to start)", cpPath)
	}
	if err != nil {
		return cp, window{}, fmt.Errorf("export: read checkpoint: %w", err)
	}
	if err := json.Unmarshal(b, &cp); err != nil || cp.Format != checkpointFormat {
		return cp, window{}, fmt.Errorf("export: %s is not a ledgerctl export checkpoint", cpPath)
	}
	saved := window{}
	if saved.since, err = time.Parse(time.RFC3339Nano, cp.Since); err == nil {
		saved.until, err = time.Parse(time.RFC3339Nano, cp.Until)
	}
	if err != nil {
		return cp, window{}, fmt.Errorf("export: checkpoint %s has a bad window", cpPath)
	}
	return cp, saved, nil
}

// resumeFile opens path to continue the export its checkpoint describes:
// the checkpoint must be for this table and, where --since or --until is
// given, for that window; the file is cut back to the last complete page.
// done reports an export that is already complete (nothing is opened).
func (e *exporter) resumeFile(c *command, path, cpPath string, win window, sinceSet, untilSet bool) (f *os.File, cp checkpoint, saved window, done bool, err error) {
	cp, saved, err = readCheckpoint(cpPath)
	if err != nil {
		return nil, cp, saved, false, err
	}
	switch {
	case cp.Table != e.a.table:
		return nil, cp, saved, false, usagef(c, "the checkpoint is for table %s, not %s", cp.Table, e.a.table)
	case sinceSet && !saved.since.Equal(win.since), untilSet && !saved.until.Equal(win.until):
		return nil, cp, saved, false, usagef(c, "the checkpoint is for the window [%s, %s); resume with the same --since and --until or none", cp.Since, cp.Until)
	}
	if cp.Done {
		fmt.Fprintf(e.a.stderr, "export: already complete: %d rows in %s\n", cp.Rows, path)
		e.bad = cp.Malformed
		return nil, cp, saved, true, e.complete()
	}
	if f, err = os.OpenFile(path, os.O_WRONLY, 0); err != nil {
		return nil, cp, saved, false, fmt.Errorf("export: open %s to resume: %w", path, err)
	}
	if err := cutToCheckpoint(f, path, cp.Offset); err != nil {
		f.Close()
		return nil, cp, saved, false, err
	}
	e.rows, e.pages, e.bad = cp.Rows, cp.Pages, cp.Malformed
	fmt.Fprintf(e.a.stderr, "export: resuming after %d rows (%d pages)\n", cp.Rows, cp.Pages)
	return f, cp, saved, false, nil
}

// cutToCheckpoint drops whatever an interrupted page left in f after
// offset, the end of the last complete page, and positions f there.
func cutToCheckpoint(f *os.File, path string, offset int64) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if fi.Size() < offset {
		return fmt.Errorf("export: %s is shorter (%d bytes) than its checkpoint says (%d); start again without --resume", path, fi.Size(), offset)
	}
	if err := f.Truncate(offset); err != nil {
		return fmt.Errorf("export: truncate %s: %w", path, err)
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// startFile creates (or empties) path for a new export of win and saves
// its first checkpoint.
func (e *exporter) startFile(c *command, path, cpPath string, win window) (*os.File, checkpoint, error) {
	if !win.until.After(win.since) {
		return nil, checkpoint{}, usagef(c, "--until must be after --since")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, checkpoint{}, fmt.Errorf("export: %w", err)
	}
	cp := checkpoint{Format: checkpointFormat, Table: e.a.table, Since: jsonTime(win.since), Until: jsonTime(win.until)}
	if err := e.save(cpPath, &cp); err != nil {
		f.Close()
		return nil, cp, err
	}
	return f, cp, nil
}

// pagesToFile writes the export's pages to f from cp.NextKey on, syncing
// each page and then saving the checkpoint after it, until the scan is
// complete; an interruption says how to resume.
func (e *exporter) pagesToFile(ctx context.Context, f *os.File, path, cpPath string, cp checkpoint, win window) error {
	resumeHint := fmt.Sprintf("%d rows saved; continue with: ledgerctl export --out %s --resume", cp.Rows, path)
	for {
		var buf bytes.Buffer
		next, n, err := e.page(ctx, win, cp.NextKey, &buf)
		if err != nil {
			return interrupted(err, resumeHint)
		}
		if _, err := f.Write(buf.Bytes()); err != nil {
			return fmt.Errorf("export: write %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("export: sync %s: %w", path, err)
		}
		e.rows += int64(n)
		e.pages++
		cp.Offset += int64(buf.Len())
		cp.NextKey, cp.Rows, cp.Pages, cp.Malformed, cp.Done = next, e.rows, e.pages, e.bad, next == ""
		if err := e.save(cpPath, &cp); err != nil {
			return err
		}
		e.progress(cp.Done)
		if cp.Done {
			fmt.Fprintf(e.a.stderr, "export: %d rows written to %s\n", cp.Rows, path)
			return e.complete()
		}
		resumeHint = fmt.Sprintf("%d rows saved; continue with: ledgerctl export --out %s --resume", cp.Rows, path)
		if e.a.afterPage != nil {
			if err := e.a.afterPage(e.pages); err != nil {
				return interrupted(err, resumeHint)
			}
		}
		if err := ctx.Err(); err != nil {
			return interrupted(err, resumeHint)
		}
	}
}

// save writes the checkpoint atomically (temporary file, sync, rename).
func (e *exporter) save(path string, cp *checkpoint) error {
	cp.Saved = jsonTime(e.a.now())
	b, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("export: checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("export: checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("export: checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("export: checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("export: checkpoint: %w", err)
	}
	return nil
}
