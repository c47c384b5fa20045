package settings

import (
	"errors"
	"strconv"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Limit is a send limit written "<max>/<window>" (5/10m) or "off".
var Limit = Kind[ledger.Cap]{
	Parse: func(s string) (ledger.Cap, error) {
		c, err := ledger.ParseCap(s)
		if err != nil {
			return ledger.Cap{}, errors.New("want <max>/<window> such as 5/10m (window whole seconds, 1s to 24h), or off")
		}
		return c, nil
	},
	Format: func(c ledger.Cap) string {
		if !c.On() {
			return "off"
		}
		return strconv.Itoa(c.Max) + "/" + FormatDuration(c.Window)
	},
}

// The send limits' defaults (docs/design.md, "Send limits").
var (
	// DefaultLimitDestination follows Twilio Verify's 5 sends to one
	// destination in 10 minutes.
	DefaultLimitDestination = ledger.Cap{Max: 5, Window: 10 * time.Minute}
	// DefaultLimitSubject allows a player a few resets an hour on every
	// channel together, far above what a person asks for.
	DefaultLimitSubject = ledger.Cap{Max: 10, Window: time.Hour}
	// DefaultLimitSMSCountry and DefaultLimitSMSGlobal are circuit
	// breakers for SMS pumping: well above a game's normal reset traffic,
	// well below what pumping costs at scale. Raise them with traffic.
	DefaultLimitSMSCountry = ledger.Cap{Max: 200, Window: time.Hour}
	DefaultLimitSMSGlobal  = ledger.Cap{Max: 1000, Window: time.Hour}
)
