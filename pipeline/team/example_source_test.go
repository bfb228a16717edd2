package team_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentforeman/foreman/pipeline/team"
)

// A stories file is a Source: it lists its stories and withdraws none. A
// Follower (Team.Follow) adds what a source lists; ghsource is the
// GitHub one.
func ExamplePlan_List() {
	plan, err := team.ParsePlan(strings.NewReader("stories:\n  - {id: US-001, title: One}\n  - {id: US-002, title: Two, after: [US-001]}\n"))
	if err != nil {
		panic(err)
	}
	var src team.Source = plan
	lst, err := src.List(context.Background(), nil)
	for _, s := range lst.Stories {
		fmt.Println(s.ID, s.After)
	}
	fmt.Println(len(lst.Dropped), err)
	// Output:
	// US-001 []
	// US-002 [US-001]
	// 0 <nil>
}
