// Package pipeline will hold the coordinator: items moving through the
// stages of a flow with guarded, idempotent message handling, dependency
// graphs, status reports and durable state.
//
// Status: not implemented yet (tracked by the pipeline issue). Nothing in
// this package is usable today.
package pipeline
