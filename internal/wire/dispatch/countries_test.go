package dispatch

import (
	"errors"
	"testing"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/smsregion"
)

func TestSMSCountries(t *testing.T) {
	s := settings.Defaults()
	allows := SMSCountries(s)
	if allows == nil {
		t.Fatal("the default allow-list is off")
	}
	for region, want := range map[string]bool{"US": true, "CA": true, "PR": false, "JM": false, "GB": false} {
		if got := allows(region); got != want {
			t.Errorf("default allows %s = %v, want %v", region, got, want)
		}
	}
	if err := settings.SMSAllowedCountries.Set(&s, "*"); err != nil {
		t.Fatal(err)
	}
	if SMSCountries(s) != nil {
		t.Error(`"*" gives a country check; want none`)
	}
	// A +1 number is not US because of its calling code: Jamaica's +1 876 is refused.
	for number, want := range map[string]string{"+12015550123": "US", "+14165550123": "CA", "+18765550123": "JM"} {
		region, err := RegionOf(number)
		if err != nil || region != want {
			t.Errorf("RegionOf = %q, %v; want %s", region, err, want)
		}
	}
	if _, err := RegionOf("+15550001234"); !errors.Is(err, smsregion.ErrInvalidNumber) {
		t.Errorf("+1 555 000 1234 (no such area code): %v, want ErrInvalidNumber", err)
	}
}
