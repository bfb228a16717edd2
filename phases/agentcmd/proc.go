package agentcmd

import (
	"errors"
	"syscall"
)

// signalGroup sends sig to process group pgid; a group that is already gone
// is not an error.
func (d *Driver) signalGroup(pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		d.cfg.Logger.Warn("signalling agent process group failed", "pgid", pgid, "signal", signalName(sig), "err", err)
	}
}
