package codes

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// KindNames are the number kinds package smsregion tells apart, by the
// names smsregion.Kind.String gives them, in the order of its constants.
var KindNames = []string{
	"unknown", "fixed_line", "mobile", "fixed_line_or_mobile", "toll_free", "premium_rate", "shared_cost",
	"voip", "personal", "pager", "uan", "voicemail",
}

// ErrInvalidKindList is wrapped by ParseKindList errors.
var ErrInvalidKindList = errors.New("smsregion: invalid number-kind list")

// KindList is a set of number kinds SMS may be sent to. The zero value is
// off: it allows every kind. A KindList is immutable and safe to share.
type KindList struct {
	kinds []string // sorted, no duplicates; nil when off
}

// ParseKindList reads a comma-separated list of kind names (KindNames:
// "mobile,fixed_line_or_mobile"). Each name must be known and appear once;
// spaces around a name are ignored. "*" switches the check off (every kind
// allowed); an empty list is refused, so that a typo cannot widen it.
// Errors quote only known names, never other text.
func ParseKindList(s string) (KindList, error) {
	s = strings.TrimSpace(s)
	if s == Off {
		return KindList{}, nil
	}
	if s == "" {
		return KindList{}, fmt.Errorf("%w: empty (write %s for every kind)", ErrInvalidKindList, Off)
	}
	var kinds []string
	for i, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		switch {
		case k == "":
			return KindList{}, fmt.Errorf("%w: entry %d is empty", ErrInvalidKindList, i+1)
		case k == Off:
			return KindList{}, fmt.Errorf("%w: %q switches the list off and stands alone", ErrInvalidKindList, Off)
		case !slices.Contains(KindNames, k):
			return KindList{}, fmt.Errorf("%w: entry %d is not a number kind (%s)", ErrInvalidKindList, i+1, strings.Join(KindNames, ", "))
		case slices.Contains(kinds, k):
			return KindList{}, fmt.Errorf("%w: %s appears twice", ErrInvalidKindList, k)
		}
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return KindList{kinds: kinds}, nil
}

// Off reports whether the list is switched off (allows every kind).
func (k KindList) Off() bool { return k.kinds == nil }

// Allows reports whether SMS may be sent to a number of kind (a KindNames
// name). An off list allows every kind.
func (k KindList) Allows(kind string) bool {
	if k.Off() {
		return true
	}
	_, found := slices.BinarySearch(k.kinds, kind)
	return found
}

// Kinds returns the allowed kinds, sorted; nil when the list is off.
func (k KindList) Kinds() []string { return slices.Clone(k.kinds) }

// String writes the list so that ParseKindList reads it back: the sorted
// names joined by commas, or "*" when off.
func (k KindList) String() string {
	if k.Off() {
		return Off
	}
	return strings.Join(k.kinds, ",")
}
