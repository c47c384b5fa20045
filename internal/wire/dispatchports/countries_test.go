package dispatchports

import (
	"errors"
	"testing"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/smsregion"
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
		n, err := NumberOf(number)
		if err != nil || n.Region != want {
			t.Errorf("NumberOf = %+v, %v; want %s", n, err, want)
		}
	}
	if _, err := NumberOf("+15550001234"); !errors.Is(err, smsregion.ErrInvalidNumber) {
		t.Errorf("+1 555 000 1234 (no such area code): %v, want ErrInvalidNumber", err)
	}
}

// TestSMSNumberKinds: the default kind allow-list is smsregion's, lets mobile
// and fixed-line-or-mobile numbers through and refuses premium-rate and
// shared-cost ones (a UK 09 number, a German 0180 number) by the kind the
// lookup gives; "*" switches the check off.
func TestSMSNumberKinds(t *testing.T) {
	s := settings.Defaults()
	if got := s.SMSAllowedNumberKinds.String(); got != smsregion.DefaultKinds {
		t.Errorf("the settings' default kinds %q, smsregion's %q", got, smsregion.DefaultKinds)
	}
	allows := SMSNumberKinds(s)
	if allows == nil {
		t.Fatal("the default kind allow-list is off")
	}
	for number, want := range map[string]bool{"+447400123456": true, "+12015550123": true, "+449012345678": false, "+4918012345": false, "+448001234567": false} {
		n, err := NumberOf(number)
		if err != nil {
			t.Fatal(err)
		}
		if got := allows(n.Kind); got != want {
			t.Errorf("a %s number of %s allowed = %v, want %v", n.Kind, n.Region, got, want)
		}
	}
	if err := settings.SMSAllowedNumberKinds.Set(&s, "*"); err != nil {
		t.Fatal(err)
	}
	if SMSNumberKinds(s) != nil {
		t.Error(`"*" gives a kind check; want none`)
	}
}
