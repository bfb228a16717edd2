// Package proc reads what Foreman needs to know about other processes from
// Linux's /proc: a process's state, group and start time (which, with its
// pid, names one process for good: pids are reused, (pid, start time)
// pairs are not), the running members of a process group, and a process's
// environment and working directory. The agent driver's orphan reaper and
// git's orphan reaper are built on it.
package proc
