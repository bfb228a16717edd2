// Package message holds the typed messages that workers and the coordinator
// exchange, and a text codec for their canonical lines (seeds 000 and 003).
//
// Status: API settled; Parse, Format and Route are being implemented.
package message
