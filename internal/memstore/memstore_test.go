package memstore_test

import (
	"testing"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestContract(t *testing.T) {
	ledgertest.RunStoreContract(t, func(*testing.T) ledger.Store { return &memstore.Store{} })
}

func TestTimelineContract(t *testing.T) {
	ledgertest.RunTimelineContract(t, func(*testing.T) ledgertest.TimelineStore { return &memstore.Store{} })
}

func TestContentContract(t *testing.T) {
	ledgertest.RunContentContract(t, func(*testing.T) ledger.ContentStore { return &memstore.Content{} })
}

func TestBudgetContract(t *testing.T) {
	ledgertest.RunBudgetContract(t, func(_ *testing.T, rates map[ledger.Channel]float64) ledger.Budget {
		return &memstore.Budget{Rates: rates}
	})
}

func TestProgressContract(t *testing.T) {
	ledgertest.RunProgressContract(t, func(*testing.T) ledger.Progress { return &memstore.Progress{} })
}

func TestFirstReadsContract(t *testing.T) {
	ledgertest.RunFirstReadsContract(t, func(t *testing.T) ledgertest.FirstReadsPorts {
		p := ledgertest.FirstReadsPorts{Store: &memstore.Store{}, Challenges: &memstore.Limits{}, Content: &memstore.Content{}}
		p.FirstReads = &memstore.FirstReads{Store: p.Store, Challenges: p.Challenges, Content: p.Content}
		return p
	})
}
