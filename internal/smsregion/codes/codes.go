// Package codes holds the ISO 3166-1 alpha-2 region codes that package
// smsregion can tell a phone number belongs to, and the SMS country
// allow-list over them. It does not link the phone-number library (no
// function does: package smsregion looks numbers up in a copy of its
// metadata); its list of known codes is generated from the library with
// smsregion's metadata.
package codes

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalidAllowList is wrapped by ParseAllowList errors.
var ErrInvalidAllowList = errors.New("smsregion: invalid allow-list")

// Known reports whether code is a region the phone-number library has
// metadata for. Every such code is two uppercase letters; "001"
// (non-geographic) and "ZZ" (unknown) are not known regions.
func Known(code string) bool {
	_, found := slices.BinarySearch(known, code)
	return found
}

// All returns every known region, sorted.
func All() []string { return slices.Clone(known) }

// Off is the allow-list text that switches the country check off.
const Off = "*"

// AllowList is a set of regions SMS may be sent to. The zero value is off:
// it allows every region. An AllowList is immutable and safe to share.
type AllowList struct {
	regions []string // sorted, no duplicates; nil when off
}

// ParseAllowList reads a comma-separated list of ISO 3166-1 alpha-2 codes
// ("GB,IE,US"). Each code must be uppercase and a known region (Known), and
// may appear once; spaces around a code are ignored. "*" and "" (empty or
// only spaces) switch the check off: the list allows every region. A list
// that names a region is never off, and an empty entry ("GB,,US", "GB,")
// is refused, so a typo cannot widen it. Errors quote only codes that are
// two uppercase letters, never other text.
func ParseAllowList(s string) (AllowList, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == Off {
		return AllowList{}, nil
	}
	var regions []string
	for i, code := range strings.Split(s, ",") {
		code = strings.TrimSpace(code)
		switch {
		case code == "":
			return AllowList{}, fmt.Errorf("%w: entry %d is empty", ErrInvalidAllowList, i+1)
		case code == Off:
			return AllowList{}, fmt.Errorf("%w: %q switches the list off and stands alone", ErrInvalidAllowList, Off)
		case !isUpperPair(code):
			return AllowList{}, fmt.Errorf("%w: entry %d is not two uppercase letters (ISO 3166-1 alpha-2)", ErrInvalidAllowList, i+1)
		case !Known(code):
			return AllowList{}, fmt.Errorf("%w: %s is not a known region", ErrInvalidAllowList, code)
		case slices.Contains(regions, code):
			return AllowList{}, fmt.Errorf("%w: %s appears twice", ErrInvalidAllowList, code)
		}
		regions = append(regions, code)
	}
	slices.Sort(regions)
	return AllowList{regions: regions}, nil
}

func isUpperPair(s string) bool {
	return len(s) == 2 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z'
}

// Off reports whether the list is switched off (allows every region).
func (a AllowList) Off() bool { return a.regions == nil }

// Allows reports whether SMS may be sent to region. An off list allows every
// region; an on list allows exactly its regions, compared exactly (region as
// smsregion.Lookup returns it: uppercase).
func (a AllowList) Allows(region string) bool {
	if a.Off() {
		return true
	}
	_, found := slices.BinarySearch(a.regions, region)
	return found
}

// Regions returns the allowed regions, sorted; nil when the list is off.
func (a AllowList) Regions() []string { return slices.Clone(a.regions) }

// String writes the list so that ParseAllowList reads it back: the sorted
// codes joined by commas, or "*" when off.
func (a AllowList) String() string {
	if a.Off() {
		return Off
	}
	return strings.Join(a.regions, ",")
}
