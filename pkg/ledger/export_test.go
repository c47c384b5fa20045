package ledger

// NewDispatcherWithAnyPolicy builds a dispatch use case whose policy is not
// validated: for the tests of defences that a valid policy never reaches
// (an attempt whose send deadline passed after the expiry check, which
// only a margin at or below the send guard, or a clock read between the
// two, lets through).
func NewDispatcherWithAnyPolicy(p Ports) (*Dispatcher, error) {
	policy := p.Policy
	p.Policy = DefaultPolicy()
	d, err := NewDispatcher(p)
	if err == nil {
		d.core.policy = policy
	}
	return d, err
}
