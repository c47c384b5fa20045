package dispatchports

import (
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/smsregion"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// SMSCountries returns the country check the SMS_ALLOWED_COUNTRIES setting
// asks for, in the shape of ledger.Limits.SMSCountries: whether an SMS may
// go to an ISO 3166-1 alpha-2 region. It is nil when the allow-list is off
// ("*"), so the ledger skips the check (and the region lookup) entirely.
func SMSCountries(s settings.Settings) func(region string) bool {
	if s.SMSAllowedCountries.Off() {
		return nil
	}
	return s.SMSAllowedCountries.Allows
}

// SMSNumberKinds returns the number-kind check the SMS_ALLOWED_NUMBER_KINDS
// setting asks for, in the shape of ledger.Limits.SMSNumberKinds; nil when
// the list is off ("*").
func SMSNumberKinds(s settings.Settings) func(kind string) bool {
	if s.SMSAllowedNumberKinds.Off() {
		return nil
	}
	return s.SMSAllowedNumberKinds.Allows
}

// NumberOf returns the ISO 3166-1 alpha-2 region and the kind of an E.164
// number (smsregion.Lookup, from the phone-number library's metadata), for
// the ledger's number lookup. Its errors never contain the number: an
// invalid number wraps smsregion.ErrInvalidNumber, a non-geographic one
// (+800, +882) is smsregion.ErrNoRegion.
func NumberOf(number string) (ledger.PhoneNumber, error) {
	n, err := smsregion.Lookup(number)
	if err != nil {
		return ledger.PhoneNumber{}, err
	}
	return ledger.PhoneNumber{Region: n.Region, Kind: n.Kind.String()}, nil
}
