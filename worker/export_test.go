package worker

// CheckInvariants exposes the core's consistency check to the external
// tests: no worker busy without an item, no item held twice.
func CheckInvariants(d *Dispatcher) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.core.checkInvariants()
}
