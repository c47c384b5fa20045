package main

import (
	"context"
	"fmt"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/dynamostore"
	"github.com/resetledger/resetledger/pkg/ledger"
)

var cmdVerify = &command{
	name:     "verify",
	synopsis: "<challenge-id> | --all [--digest-bucket B (--digest-key ARN | --public-key FILE)]",
	summary:  "check the hash chain of a challenge's rows, or of every row, and against the signed digests",
	help: `Checks the hash-chained history of ledger rows: every entry's hash, every
link to its predecessor, the binding to the row's key, and that the history
ends in the row's state. An edited, reordered or removed entry breaks it.

With a challenge id it checks that challenge's rows; with --all it scans the
whole table (cost follows the table). Prints each broken row with the first
failing entry and exits 1 if any chain is broken; exits 3 if the challenge
has no row.

With --digest-bucket (default DIGEST_BUCKET), or --digest-dir (a copy of
the bucket's digests/ folder), it also checks the rows against
the signed digests (docs/digests.md), trusting neither the table nor its
writers: every digest's signature under the digest key's public key
(--digest-key, default DIGEST_KEY_ARN, read with kms:GetPublicKey; or
--public-key, a PEM or DER file), the numbering and previous-digest hashes
(no hole), and for each row every (entry count, head) a digest recorded:
an entry rewritten (even with its chain recomputed) or removed fails, as
does, with --all, a digested row missing from the table before its
retention ends. Each failure names the digest (DIGEST n) or the row
(ROW key, GAP key). Rows changed after the last digest are listed as
PENDING with their age; they do not fail.`,
	run: func(a *app, ctx context.Context, c *command, args []string) error {
		fs := a.flagSet(c.name)
		all := fs.Bool("all", false, "verify every row of the table")
		bucket := fs.String("digest-bucket", a.getenv(settings.DigestBucket.Env), "the digest bucket: also check against the signed digests")
		keyARN := fs.String("digest-key", a.getenv(settings.DigestKeyARN.Env), "the digest key's ARN (its public key is read with kms:GetPublicKey)")
		publicKey := fs.String("public-key", "", "a PEM or DER file holding the digest key's public key (instead of --digest-key)")
		dir := fs.String("digest-dir", "", "a folder holding a copy of the digests (<dir>/digests/<seq>.json), instead of --digest-bucket")
		pos, err := a.parse(c, fs, args, 0, 1)
		if err != nil {
			return err
		}
		if *all == (len(pos) == 1) {
			return usagef(c, "give either a challenge id or --all")
		}
		var dc *digestCheck
		if *bucket != "" || *dir != "" {
			if dc, err = a.loadDigests(ctx, *bucket, *dir, *keyARN, *publicKey); err != nil {
				return err
			}
		}
		var rows, entries, broken int
		check := func(e ledger.Entry) error {
			rows++
			entries += len(e.History)
			if dc != nil {
				dc.row(a, e)
			}
			cv := verifyChain(e)
			if cv.Verified {
				return nil
			}
			broken++
			fmt.Fprintf(a.stdout, "BROKEN  %s / %s  %s  [%s]\n  %s\n", e.Identity.ChallengeID, e.Identity.Channel, e.Key, e.State, cv.Error)
			switch i := cv.brokenAt(); {
			case i >= 0 && i < len(e.History):
				printEvent(a.stdout, "  ", i, e.History[i], "  <-- first failing entry")
			case i >= len(e.History):
				fmt.Fprintf(a.stdout, "  the history has %d entries (row version %d) and ends in %s; entries are missing after [%d]\n", len(e.History), e.Version, e.Last().To, len(e.History)-1)
			}
			return nil
		}
		if *all {
			sc, err := a.scanner(ctx)
			if err != nil {
				return err
			}
			if err := sc.All(ctx, dynamostore.ScanFilter{}, check); err != nil {
				return err
			}
		} else {
			got, err := a.challengeRows(ctx, pos[0])
			if err != nil {
				return err
			}
			for _, e := range got {
				_ = check(e)
			}
		}
		if dc != nil && *all {
			for _, f := range dc.chain.Missing(a.now()) {
				dc.report(a, f)
			}
		}
		if broken > 0 {
			return &exitError{code: exitFailure, err: fmt.Errorf("verification failed: %d of %d rows have a broken hash chain", broken, rows)}
		}
		if dc != nil && dc.fails > 0 {
			return &exitError{code: exitFailure, err: fmt.Errorf("verification failed: %d findings against the signed digests", dc.fails)}
		}
		if dc != nil {
			fmt.Fprintf(a.stdout, "ok: %d rows, %d history entries, every hash chain verifies; %s\n", rows, entries, dc.summary())
			return nil
		}
		fmt.Fprintf(a.stdout, "ok: %d rows, %d history entries, every hash chain verifies\n", rows, entries)
		return nil
	},
}
