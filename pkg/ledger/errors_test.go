package ledger_test

import (
	"errors"
	"testing"

	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestRejectionIsDistinguishable(t *testing.T) {
	err := error(&ledger.Rejection{Reason: "invalid destination"})
	wrapped := errors.Join(errors.New("sms"), err)
	var rej *ledger.Rejection
	if !errors.As(wrapped, &rej) || rej.Reason != "invalid destination" || err.Error() != "transport rejected: invalid destination" {
		t.Fatalf("%v", wrapped)
	}
}
