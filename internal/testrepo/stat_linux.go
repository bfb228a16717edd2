package testrepo

import (
	"os"
	"syscall"
)

func statOf(fi os.FileInfo) stat {
	s, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return statFromInfo(fi)
	}
	return stat{
		ctimeSec: uint32(s.Ctim.Sec), ctimeNsec: uint32(s.Ctim.Nsec),
		mtimeSec: uint32(s.Mtim.Sec), mtimeNsec: uint32(s.Mtim.Nsec),
		dev: uint32(s.Dev), ino: uint32(s.Ino), uid: s.Uid, gid: s.Gid,
	}
}
