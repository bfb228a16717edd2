// Package spawnrules holds pipeline.DispatcherSpawner's decisions as a
// deterministic table, so that the spawner (which runs goroutines, timers
// and a worker.Dispatcher) and the whole-team simulator's pool bridge
// (pipeline/team/teamsim, which schedules the same steps on a simulated
// clock) share one implementation of them: what a spawn does for an
// assignment already run or after Close, which pool events end an
// assignment and whether its end is reported (the agent's report, else
// EventIdle), what a shutdown request marks, how a probe is answered, the
// pool settings the spawner imposes and the worker.Item a spawn submits.
//
// A Table holds no lock and starts nothing: its caller serializes the
// calls (the spawner under its mutex, the simulator on its one goroutine)
// and carries out what the answers say.
package spawnrules
