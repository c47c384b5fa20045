// Package smsregion tells which country or region an SMS destination belongs
// to, and whether a country allow-list lets a message go there.
//
// The region comes from the metadata of github.com/nyaruka/phonenumbers (a
// port of Google's libphonenumber), not from a prefix table of our own: a
// shared calling code is resolved by the number's ranges (+1 787 is PR, +1
// 416 is CA, +44 1481 is GG), and a number outside every assigned range is
// refused rather than guessed. Regions are ISO 3166-1 alpha-2 codes, the
// codes AWS End User Messaging SMS protect configurations use.
//
// Lookup also reports the number's Kind as the metadata classifies it;
// Kind.Premium is true for premium-rate and shared-cost ranges, the ranges
// whose operators share revenue with the caller (SMS pumping). The
// classification is only as complete as the metadata: a country whose
// metadata lists no premium range classifies none as premium.
//
// The package does not link the library: its package initialization parses
// all of its metadata (about 6 ms and 2.5 MB at every cold start of the
// function that links it). metadata_gen.go is a copy of the part of the
// metadata Lookup reads, generated from the library by internal/gen, and
// lookup.go follows the library's own parse and validation path over it
// (Parse, IsValidNumber, GetRegionCodeForNumber, GetNumberType); patterns
// are compiled on first use. After upgrading the library, run
// go generate ./internal/smsregion (make smsregion); TestGeneratedIsCurrent fails
// until then, and the equivalence tests (equivalence_test.go: every example
// number of the metadata, 200,000 random and mutated numbers, and
// FuzzLookupMatchesLibrary) hold Lookup to the library's answers. Only the
// generator and the tests link the library.
//
// The allow-lists and the table of known codes (also generated) live in
// package codes: the settings every function loads read them, and only
// dispatch looks numbers up.
//
// No error text contains the number or any of its digits.
package smsregion

import (
	"errors"
	"fmt"

	"github.com/resetledger/resetledger/internal/smsregion/codes"
)

//go:generate go run ./internal/gen

// ErrInvalidNumber is returned for a destination that is not an E.164
// number ("+" and 2 to 15 digits, the first not 0) or that is not valid
// under the library's metadata (no assigned range matches it).
var ErrInvalidNumber = errors.New("smsregion: invalid phone number")

// ErrNoRegion is returned for a valid number that belongs to no country or
// region: a non-geographic calling code such as +800 (international
// freephone) or +882 (international networks).
var ErrNoRegion = errors.New("smsregion: number belongs to no region")

// isE164 reports whether s has the E.164 form, ^\+[1-9][0-9]{1,14}$: a plus
// sign, a country code that does not start with 0, 2 to 15 digits in all.
// (Written out rather than a regexp compiled at package initialization.)
func isE164(s string) bool {
	if len(s) < 3 || len(s) > 16 || s[0] != '+' || s[1] == '0' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Kind is what the library's metadata says a number is.
type Kind int

// The kinds, in the library's terms.
const (
	Unknown           Kind = iota // matches no typed range of its region
	FixedLine                     // a landline
	Mobile                        // a mobile number
	FixedLineOrMobile             // the region's ranges do not tell the two apart (US, CA, ...)
	TollFree                      // free to the caller
	PremiumRate                   // the caller pays more than a normal rate; the operator shares the revenue
	SharedCost                    // the cost is split between caller and recipient
	VoIP                          // a VoIP number
	Personal                      // a personal number, routed to another number
	Pager                         // a pager
	UAN                           // a universal access (company) number
	Voicemail                     // a voicemail access number
)

// String returns the kind's snake_case name ("premium_rate"): its name in
// codes.KindNames, which the stage's kind allow-list is written in.
func (k Kind) String() string {
	if k < 0 || int(k) >= len(codes.KindNames) {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return codes.KindNames[k]
}

// Premium reports whether numbers of this kind are premium-rate or
// shared-cost: ranges that earn their operator a share of what is sent to
// them, the target of SMS pumping. A reset is never legitimately sent there.
func (k Kind) Premium() bool { return k == PremiumRate || k == SharedCost }

// Number is what Lookup found out about a destination. It holds nothing from
// which the number could be recovered.
type Number struct {
	// Region is the ISO 3166-1 alpha-2 code of the number's country or
	// region ("GB", "PR").
	Region string
	// Kind is the number's type by the metadata.
	Kind Kind
}

// Lookup returns the region and kind of an E.164 number. It returns an error
// wrapping ErrInvalidNumber for text that is not E.164 or not a valid number,
// and ErrNoRegion for a valid non-geographic number.
func Lookup(number string) (Number, error) {
	if !isE164(number) {
		return Number{}, fmt.Errorf("%w: want E.164 (+ and 2 to 15 digits)", ErrInvalidNumber)
	}
	region, kind, parsed, valid := lookup(number)
	if !parsed {
		return Number{}, fmt.Errorf("%w: unparsable", ErrInvalidNumber)
	}
	if !valid {
		return Number{}, fmt.Errorf("%w: in no assigned range", ErrInvalidNumber)
	}
	if !KnownRegion(region) {
		return Number{}, ErrNoRegion
	}
	return Number{Region: region, Kind: kind}, nil
}

// Region returns the ISO 3166-1 alpha-2 region of an E.164 number; see Lookup.
func Region(number string) (string, error) {
	n, err := Lookup(number)
	return n.Region, err
}

// KnownRegion reports whether code is a region the library has metadata
// for (codes.Known). Every such code is two uppercase letters; "001"
// (non-geographic) and "ZZ" (unknown) are not known regions.
func KnownRegion(code string) bool { return codes.Known(code) }

// KnownRegions returns every known region, sorted.
func KnownRegions() []string { return codes.All() }

// The allow-list lives in package codes, which does not link the library;
// these names are its.
type (
	// AllowList is codes.AllowList: a set of regions SMS may be sent to,
	// whose zero value allows every region.
	AllowList = codes.AllowList
)

// Off is the allow-list text that switches the country check off ("*").
const Off = codes.Off

// ErrInvalidAllowList is wrapped by ParseAllowList errors.
var ErrInvalidAllowList = codes.ErrInvalidAllowList

// ParseAllowList reads a comma-separated list of ISO 3166-1 alpha-2 codes;
// see codes.ParseAllowList.
func ParseAllowList(s string) (AllowList, error) { return codes.ParseAllowList(s) }

// DefaultKinds is the number kinds an SMS reset may go to unless a stage
// says otherwise: mobile numbers, and the ranges whose metadata does not tell
// mobile from fixed line (the +1 countries). Premium-rate and shared-cost
// ranges (SMS pumping), toll-free, VoIP, pager, UAN, voicemail, personal and
// fixed-line numbers are refused.
const DefaultKinds = "fixed_line_or_mobile,mobile"
