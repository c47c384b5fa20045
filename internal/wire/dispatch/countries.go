package dispatch

import (
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/smsregion"
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

// RegionOf returns the ISO 3166-1 alpha-2 region of an E.164 number
// (smsregion.Region, from the phone-number library's metadata), for the
// ledger's region lookup. Its errors never contain the number: an invalid
// number wraps smsregion.ErrInvalidNumber, a non-geographic one (+800, +882)
// is smsregion.ErrNoRegion.
func RegionOf(number string) (string, error) { return smsregion.Region(number) }
