// Package pgstore is a store.Store on PostgreSQL, through pgx, for hosts
// that run coordinators on several machines; it lives in its own package
// so that hosts that do not use it do not compile pgx. It also elects one
// leader among any number of coordinators, with a lease whose term number
// fences every write the leader makes.
package pgstore
