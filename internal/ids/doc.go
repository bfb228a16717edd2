// Package ids validates the identifiers that Foreman turns into paths,
// branch names and commit trailers.//
// The rule: ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$, no "..", not ending in ".lock"
// or "." (git refuses such ref components). The root package's ItemID,
// WorkerID and AssignmentID validate through it.
package ids
