package message

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRoute(t *testing.T) {
	tests := []struct {
		name string
		text string
		want WakeUp
	}{
		{"callback", "[executor] IMPL-001 completed",
			WakeUp{Kind: WakeCallback, Role: RoleExecutor, Callback: Callback{Role: RoleExecutor, Subject: "IMPL-001", Status: CallbackCompleted}}},
		{"callback not canonical", "[planner] finished the plan, see PLAN-001",
			WakeUp{Kind: WakeCallback, Role: RolePlanner}},
		{"callback wins over check", "[tester] status: TEST-001 completed",
			WakeUp{Kind: WakeCallback, Role: RoleTester}},
		{"callback wins over resume", "[reviewer] REVIEW-001 in_progress: next file",
			WakeUp{Kind: WakeCallback, Role: RoleReviewer, Callback: Callback{Role: RoleReviewer, Subject: "REVIEW-001", Status: CallbackInProgress, Text: "next file"}}},
		{"tag inside text", "message from [fe-developer]: DEV-FE-001 is done",
			WakeUp{Kind: WakeCallback, Role: RoleFEDeveloper}},
		{"callback on a later line", "worker report\n[analyst] RESEARCH-001 completed: 4 sources",
			WakeUp{Kind: WakeCallback, Role: RoleAnalyst, Callback: Callback{Role: RoleAnalyst, Subject: "RESEARCH-001", Status: CallbackCompleted, Text: "4 sources"}}},
		{"tag case-insensitive", "[ARCHITECT] design ready", WakeUp{Kind: WakeCallback, Role: RoleArchitect}},
		{"callback of another role's line", "[writer] see [executor] IMPL-001 completed",
			WakeUp{Kind: WakeCallback, Role: RoleWriter}},
		{"check", "check", WakeUp{Kind: WakeCheck}},
		{"status", "what's the status?", WakeUp{Kind: WakeCheck}},
		{"check beats resume", "check then resume", WakeUp{Kind: WakeCheck}},
		{"check substring", "checkpoint reached", WakeUp{Kind: WakeCheck}},
		{"check uppercase", "CHECK", WakeUp{Kind: WakeCheck}},
		{"resume", "resume", WakeUp{Kind: WakeResume}},
		{"continue", "Continue please", WakeUp{Kind: WakeResume}},
		{"next", "next", WakeUp{Kind: WakeResume}},
		{"spawn next", "", WakeUp{Kind: WakeSpawnNext}},
		{"spawn next after dispatch", "dispatch done", WakeUp{Kind: WakeSpawnNext}},
		{"unknown role", "[coordinator] Pipeline ready", WakeUp{Kind: WakeSpawnNext, UnknownRole: "coordinator"}},
		{"unknown role then check", "[janitor] status", WakeUp{Kind: WakeCheck, UnknownRole: "janitor"}},
		{"unknown then known", "[janitor] [discussant] DISCUSS-006 completed",
			WakeUp{Kind: WakeCallback, Role: RoleDiscussant, UnknownRole: "janitor"}},
		{"every known role: explorer", "[explorer] x", WakeUp{Kind: WakeCallback, Role: RoleExplorer}},
		{"every known role: fe-qa", "[fe-qa] x", WakeUp{Kind: WakeCallback, Role: RoleFEQA}},
		{"brackets without role", "[] resume", WakeUp{Kind: WakeResume}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Route(tc.text))
		})
	}
}

func TestRouteEveryKnownRole(t *testing.T) {
	for _, r := range KnownRoles() {
		w := Route("[" + string(r) + "] T-1 completed")
		assert.Equal(t, WakeCallback, w.Kind, r)
		assert.Equal(t, r, w.Role)
		assert.Equal(t, Callback{Role: r, Subject: "T-1", Status: CallbackCompleted}, w.Callback)
	}
	assert.Len(t, KnownRoles(), 11)
}

func TestRouterCustomRoles(t *testing.T) {
	r := Router{Roles: []Role{"janitor"}}
	assert.Equal(t, WakeUp{Kind: WakeCallback, Role: "janitor", Callback: Callback{Role: "janitor", Subject: "J-1", Status: CallbackFailed}},
		r.Route("[janitor] J-1 failed"))
	assert.Equal(t, WakeUp{Kind: WakeSpawnNext, UnknownRole: "executor"}, r.Route("[executor] IMPL-001 completed"))
	assert.Equal(t, WakeUp{Kind: WakeSpawnNext, UnknownRole: "executor"}, Router{Roles: []Role{}}.Route("[executor] x"))
}

func TestWakeUpKindString(t *testing.T) {
	assert.Equal(t, "callback", WakeCallback.String())
	assert.Equal(t, "check", WakeCheck.String())
	assert.Equal(t, "resume", WakeResume.String())
	assert.Equal(t, "spawn-next", WakeSpawnNext.String())
	assert.Equal(t, "WakeUpKind(0)", WakeUpKind(0).String())
}
