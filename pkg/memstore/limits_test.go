package memstore_test

import (
	"testing"

	"github.com/resetledger/resetledger/pkg/ledgertest"
	"github.com/resetledger/resetledger/pkg/memstore"
)

func TestLimitsContract(t *testing.T) {
	ledgertest.RunLimitsContract(t, func(*testing.T) ledgertest.Limits { return &memstore.Limits{} })
}
