package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// recordForgeries are the ways someone allowed to invoke dispatch changes a
// genuine stream record before handing it over (DESIGN 16): only fields the
// decision reads.
var recordForgeries = []string{"earlier expiry", "another subject", "another content hash", "later version"}

// forgeRecord emits a forged copy of the stream record whose new image is
// img, as a direct invocation of dispatch would deliver it.
func (s *sim) forgeRecord(img ledger.Entry) {
	how := recordForgeries[s.c.pick(len(recordForgeries), "record forgery")]
	f := img
	f.History = slices.Clone(img.History)
	switch how {
	case "earlier expiry":
		f.ExpiresAt = s.now.Add(-time.Minute).UTC().Truncate(ledger.Precision)
	case "another subject":
		// A subject whose newer challenge would supersede this one.
		f.SubjectRef = s.w.challenges[len(s.w.challenges)-1].subject
		if f.SubjectRef == img.SubjectRef {
			f.SubjectRef = "subj-forged"
		}
	case "another content hash":
		f.ContentHash = strings.Repeat("0", 64)
	case "later version":
		f.Version++
	}
	s.stats.Faults["stream record forged"]++
	s.note(nil, "stream record forged", img.Key, how)
	s.emit(&trigger{fn: fnDispatch, source: "forged stream", key: img.Key, image: &f, forged: how, due: s.now})
}

// checkForgedWrite fails when the invocation that wrote w was handed a
// forged stream record and wrote its row over the version the record
// forged (or an earlier one): it decided from the record, not the row. A
// write over a later version is the row's own decision, as for any stale
// record.
func (s *sim) checkForgedWrite(w writeFact) {
	t := w.inv.trig
	if t.forged == "" || !w.existed || w.after.Key != t.key || w.before.Version > t.image.Version {
		return
	}
	s.fail(invForgedRecord, fmt.Sprintf("%s, handed a stream record forged (%s) at version %d, wrote %s over version %d of row %s",
		w.inv, t.forged, t.image.Version, w.after.State, w.before.Version, s.label(t.key)), t.key)
}
