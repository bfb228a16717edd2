package worker

// CheckInvariants exposes the core's consistency check to the external
// tests: no worker busy without an item, no item held twice.
func CheckInvariants(d *Dispatcher) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.core.checkInvariants()
}

// StuckQGLen reports how many items the stuck quality-gate detector holds a
// history for, to check that every way out of the Dispatcher frees it.
func StuckQGLen(d *Dispatcher) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.core.stuckQG.Len()
}
