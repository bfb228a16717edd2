// Package worker will hold the Dispatcher: the worker pool, assignment with
// fencing tokens, heartbeats, progress timeouts, review rejection, escalation
// and the runtime that supervises agent processes.
//
// Status: not implemented yet (tracked by the worker issue). Nothing in this
// package is usable today.
package worker
