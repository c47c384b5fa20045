package settings

import (
	"errors"
	"strings"

	"github.com/resetledger/resetledger/internal/smsregion/codes"
)

// DefaultSMSCountries is the default SMS country allow-list: the United
// States and Canada. It is deliberately narrow (docs/deploy.md, "SMS destination
// countries"): every other country, including the other regions of the +1
// calling code, is a decision an operator takes with its cost and its
// origination identities in view.
const DefaultSMSCountries = "US,CA"

// Countries is an SMS country allow-list: comma-separated ISO 3166-1
// alpha-2 codes (uppercase, each a region the phone-number library knows,
// none twice), or "*" for none (every country allowed). Unset means the
// variable's default; an off list is written "*", so the stack passes it on.
var Countries = Kind[codes.AllowList]{
	Parse: func(s string) (codes.AllowList, error) {
		a, err := codes.ParseAllowList(s)
		if err != nil {
			// The detail names at most a two-letter code, never other text.
			detail := strings.TrimPrefix(err.Error(), codes.ErrInvalidAllowList.Error()+": ")
			return codes.AllowList{}, errors.New("want comma-separated ISO 3166-1 alpha-2 codes such as US,CA, or * for every country: " + detail)
		}
		return a, nil
	},
	Format: codes.AllowList.String,
}

// smsregionDefaultKinds is smsregion.DefaultKinds (settings does not link
// the phone-number library; a test holds the two equal).
const smsregionDefaultKinds = "fixed_line_or_mobile,mobile"

// NumberKinds is an SMS number-kind allow-list: comma-separated kind names
// (codes.KindNames), or "*" for every kind.
var NumberKinds = Kind[codes.KindList]{
	Parse: func(s string) (codes.KindList, error) {
		k, err := codes.ParseKindList(s)
		if err != nil {
			detail := strings.TrimPrefix(err.Error(), codes.ErrInvalidKindList.Error()+": ")
			return codes.KindList{}, errors.New("want comma-separated number kinds such as mobile,fixed_line_or_mobile, or * for every kind: " + detail)
		}
		return k, nil
	},
	Format: codes.KindList.String,
}
