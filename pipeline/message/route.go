package message

import "github.com/agentforeman/foreman"

// Role is a worker role of the team lifecycle (seed 003).
type Role string

// The known worker roles of seed 003.
const (
	RoleAnalyst     Role = "analyst"
	RoleWriter      Role = "writer"
	RoleDiscussant  Role = "discussant"
	RolePlanner     Role = "planner"
	RoleExecutor    Role = "executor"
	RoleTester      Role = "tester"
	RoleReviewer    Role = "reviewer"
	RoleExplorer    Role = "explorer"
	RoleArchitect   Role = "architect"
	RoleFEDeveloper Role = "fe-developer"
	RoleFEQA        Role = "fe-qa"
)

// KnownRoles returns the known worker roles of seed 003, in its order.
func KnownRoles() []Role {
	return []Role{RoleAnalyst, RoleWriter, RoleDiscussant, RolePlanner, RoleExecutor,
		RoleTester, RoleReviewer, RoleExplorer, RoleArchitect, RoleFEDeveloper, RoleFEQA}
}

// CallbackStatus is the task status a worker claims in its callback.
type CallbackStatus string

// The callback statuses.
const (
	CallbackCompleted  CallbackStatus = "completed"
	CallbackInProgress CallbackStatus = "in_progress"
	CallbackFailed     CallbackStatus = "failed"
)

// Callback is a worker's report on its task:
//
//	[{role}] {subject} {completed|in_progress|failed}
//	[{role}] {subject} {completed|in_progress|failed}: {text}
type Callback struct {
	Role    Role
	Subject foreman.ItemID
	Status  CallbackStatus
	Text    string // empty: absent
}

// WakeUpKind is the handler a wake-up is routed to (seed 003, Wake-up
// Source Detection).
type WakeUpKind int

// The handlers, in the seed's priority order.
const (
	WakeCallback WakeUpKind = iota + 1
	WakeCheck
	WakeResume
	WakeSpawnNext
)

// WakeUp is the routing decision for one wake-up text.
type WakeUp struct {
	Kind WakeUpKind
	// Role is the known role whose tag routed the text to WakeCallback.
	Role Role
	// Callback is the parsed callback when Kind is WakeCallback and the
	// text is a canonical callback line; the zero Callback otherwise.
	Callback Callback
	// UnknownRole is the tag of an unknown role found in the text (seed 003:
	// "Worker callback from unknown role: log info"); routing ignores it.
	UnknownRole string
}

// Router routes wake-up texts. The zero Router knows the roles of KnownRoles.
type Router struct {
	// Roles are the known worker roles; nil means KnownRoles().
	Roles []Role
}

// Route routes text with the zero Router.
func Route(text string) WakeUp { return Router{}.Route(text) }

// Route routes text.
func (r Router) Route(text string) WakeUp {
	return WakeUp{Kind: WakeSpawnNext}
}
