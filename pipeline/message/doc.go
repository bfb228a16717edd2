// Package message holds the typed messages that workers and the coordinator
// exchange, a text codec for their canonical lines, and the routing of the
// coordinator's wake-ups.
//
// # Messages and the codec
//
// Every message is a comparable value implementing Message (Kind, ItemID,
// StageNum). Parse turns one line into a message; Format prints its
// canonical line; Parse(Format(m)) == m for every valid m, which Validate
// checks. An Envelope adds what the coordinator fences on: the sender's
// WorkerID and the AssignmentID it works under, with the raw text; Open
// builds one and parses it, Wrap builds one of a typed message received in
// the coordinator's own process (nothing to parse).
//
// The canonical lines are the story flow's, from the pipeline orchestrator's
// message protocol (ln-1000-pipeline-orchestrator: phases/phase4_handlers.md,
// references/message_protocol.md, worker_prompts.md,
// worker_health_contract.md). Worker to coordinator:
//
//	Stage 0 COMPLETE for {id}. {N} tasks created. Plan score: {score}/4.       Stage0Complete
//	Stage 0 ERROR for {id}: {details}                                           Stage0Error
//	Stage 1 COMPLETE for {id}. Verdict: GO. Readiness: {score}.                 Stage1Complete
//	Stage 1 COMPLETE for {id}. Verdict: NO-GO. Readiness: {score}. Reason: {reason}
//	Stage 1 ERROR for {id}: {details}                                           Stage1Error
//	Stage 2 COMPLETE for {id}. All tasks Done. Story set to To Review.          Stage2Complete
//	Stage 2 ERROR for {id}: {details}                                           Stage2Error
//	Stage 3 COMPLETE for {id}. Verdict: {PASS|CONCERNS|WAIVED}. Quality Score: {score}/100.
//	Stage 3 COMPLETE for {id}. Verdict: FAIL. Quality Score: {score}/100. Issues: {issues}
//	Stage 3 ERROR for {id}: {details}                                           Stage3Error
//	Status for {id}: Stage {N} {EXECUTING|WAITING|ERROR}. Current step: {description}.
//
// The Stage 1 and Stage 3 reports may end with ". Agents: {agents_info}."
// (message_protocol.md), after the Reason or Issues if there is one. Stage 1
// and Stage 3 ERROR lines have no handler of their own in the message
// protocol, but its ERROR pattern accepts them, so Parse does too and the
// coordinator decides. Coordinator to worker:
//
//	ACK Stage {N} for {id}                                                      Ack
//	Execute Stage {N} for {id}                                                  ExecuteStage
//	Status check: are you still working on Stage {N} for {id}?                  StatusCheck
//	Pipeline complete for {id}. Shutting down.                                  Shutdown
//
// A stage of any flow, the story flow's included, may also report with a
// Report, whose line names any stage 0..MaxStage and any outcome word:
//
//	Stage {N} REPORT for {id}: {OUTCOME}. Score: {n}. Tasks: {n}. Details: {text}   Report
//
// Score, Tasks and Details are each optional, in that order. A Report is
// also the typed verdict a stage runner hands its coordinator in one
// process (nothing is formatted there to be parsed again); Report.Canonical
// is the story flow's own message when one says the same, which Line
// prints, and ReportOf reads any stage report as a Report.
//
// And the worker callback of the task graph, whose only fixed part in the
// team lifecycle it comes from is the "[role]" tag; the rest is Foreman's:
//
//	[{role}] {subject} {completed|in_progress|failed}
//	[{role}] {subject} {completed|in_progress|failed}: {text}                   Callback
//
// # Parsing rules
//
// Parse takes one line: surrounding whitespace is ignored; an embedded line
// break, invalid UTF-8 or a control character other than tab is unparseable.
// Keywords are case-sensitive, as in the message protocol's patterns. Ids are
// checked with foreman.ItemID.Validate (not the protocol's [A-Z]+-\d+),
// stages must be 0..MaxStage (999) written without leading zeros, and
// 0..MaxStoryStage (3) in the story flow's COMPLETE and ERROR lines; a
// Report's score 0..9999 and task count 1..MaxTasks; the plan score 0..4, readiness 0..10
// (worker_prompts.md: GO needs 5), the quality score 0..100, the task count
// 0..9999. Tolerated, because the protocol's patterns tolerate them: any
// whitespace (or none) after "COMPLETE for {id}." and after "ERROR for
// {id}:"; the final period of the Stage 0, Stage 1, Stage 2 and Stage 3
// reports and of the Agents field; leading zeros in numbers; any case in a
// callback's role tag. Nothing else: any other deviation is a *ParseError
// (matching ErrUnparseable), which the protocol answers with a status probe
// and then a pause. Status replies are parsed by health.ParseStatusReply,
// with the stage range-checked here; its errors stay in the chain.
//
// # Wake-up routing
//
// Route (or a Router with its own roles) picks the handler for a wake-up
// text by the task graph's priorities: a "[role]" tag of a known role (analyst,
// writer, discussant, planner, executor, tester, reviewer, explorer,
// architect, fe-developer, fe-qa) → callback; "check" or "status" → check;
// "resume", "continue" or "next" → resume; anything else → spawn-next.
package message
