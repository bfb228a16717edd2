// Package teamcore is the team's coordinator and its decisions, shared by
// the team (pipeline/team) and its simulator (pipeline/team/teamsim), so
// that the simulator's seeds check the code that ships.
//
// Coordinator is one Run's coordination of the layers, in the style of
// etcd raft's Ready: it owns the table of the stories' task assignments
// and decides what a graph spawn, a worker's report or event, a story's
// end, a person's decision and a restart mean, calling the layers through
// small interfaces (Flow, Graph, Host, a pipeline.Spawner) and returning
// the Effects that need scheduling (graph wake-ups, parking a story's
// task, a conflict rework, events to record) instead of starting
// goroutines. Team.Run carries them out on goroutines; the simulator as
// scheduled events in an order its seed picks.
//
// Beside it: conflict triage (Triager, the Merger; TriageNext and
// ConflictReworkDue, its pure decisions), the board (StoreBoard,
// BoardAfter), and the pure decisions SpawnMove and GraphMoveFor.
package teamcore
