package message

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman"
)

// Role is a worker role of the team lifecycle (the task graph's roles).
type Role string

// The known worker roles of the team lifecycle.
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

// KnownRoles returns the known worker roles of the team lifecycle, in the
// order of the constants above.
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

// WakeUpKind is the handler a wake-up of the task-graph coordinator is
// routed to.
type WakeUpKind int

// The handlers, in priority order.
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
	// UnknownRole is the tag of an unknown role found in the text, for the
	// coordinator to log; routing ignores it.
	UnknownRole string
}

// Router routes wake-up texts. The zero Router knows the roles of KnownRoles.
type Router struct {
	// Roles are the known worker roles; nil means KnownRoles().
	Roles []Role
}

// Route routes text with the zero Router.
func Route(text string) WakeUp { return Router{}.Route(text) }

var roleTagRE = regexp.MustCompile(`\[([A-Za-z][A-Za-z0-9_-]*)\]`)

// Route routes text by priority, first match wins:
//
//  1. it contains "[<role>]" for a known role → WakeCallback;
//  2. it contains "check" or "status" → WakeCheck;
//  3. it contains "resume", "continue" or "next" → WakeResume;
//  4. otherwise → WakeSpawnNext (the initial spawn after dispatch).
//
// Matching is case-insensitive and by substring: "checkpoint" contains
// "check", "nextjs" contains "next". A tag of an unknown role does not route
// (it is reported in UnknownRole).
func (r Router) Route(text string) WakeUp {
	roles := r.Roles
	if roles == nil {
		roles = KnownRoles()
	}
	var w WakeUp
	for _, tag := range roleTagRE.FindAllStringSubmatch(text, -1) {
		role, ok := knownRole(roles, tag[1])
		if !ok {
			if w.UnknownRole == "" {
				w.UnknownRole = tag[1]
			}
			continue
		}
		w.Kind, w.Role = WakeCallback, role
		w.Callback = callbackIn(text, role)
		return w
	}
	lower := strings.ToLower(text)
	switch {
	case strings.Contains(lower, "check") || strings.Contains(lower, "status"):
		w.Kind = WakeCheck
	case strings.Contains(lower, "resume") || strings.Contains(lower, "continue") || strings.Contains(lower, "next"):
		w.Kind = WakeResume
	default:
		w.Kind = WakeSpawnNext
	}
	return w
}

func knownRole(roles []Role, tag string) (Role, bool) {
	for _, r := range roles {
		if strings.EqualFold(string(r), tag) {
			return r, true
		}
	}
	return "", false
}

// callbackIn returns the first line of text that is a canonical callback of
// role, or the zero Callback.
func callbackIn(text string, role Role) Callback {
	for _, line := range strings.Split(text, "\n") {
		m, err := Parse(line)
		if err != nil {
			continue
		}
		if cb, ok := m.(Callback); ok && strings.EqualFold(string(cb.Role), string(role)) {
			return cb
		}
	}
	return Callback{}
}

func (k WakeUpKind) String() string {
	switch k {
	case WakeCallback:
		return "callback"
	case WakeCheck:
		return "check"
	case WakeResume:
		return "resume"
	case WakeSpawnNext:
		return "spawn-next"
	}
	return "WakeUpKind(" + strconv.Itoa(int(k)) + ")"
}
