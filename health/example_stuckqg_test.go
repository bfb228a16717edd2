package health_test

import (
	"fmt"

	"github.com/agentforeman/foreman/health"
)

func ExampleStuckQG() {
	d := health.NewStuckQG(health.StuckQGConfig{}) // 3 identical within the last 10
	for _, out := range []string{"lint: x.go:3", "test: TestA", "lint: x.go:3", "test: TestA", "lint: x.go:3"} {
		v := d.Record("item-1", []byte(out))
		fmt.Printf("%-13s stuck=%v repeats=%d streak=%d\n", out, v.Stuck, v.Repeats, v.Streak)
	}
	d.Reset("item-1") // the item's work ended: free its history
	fmt.Println("subjects:", d.Len())
	// Output:
	// lint: x.go:3  stuck=false repeats=1 streak=1
	// test: TestA   stuck=false repeats=1 streak=1
	// lint: x.go:3  stuck=false repeats=2 streak=1
	// test: TestA   stuck=false repeats=2 streak=1
	// lint: x.go:3  stuck=true repeats=3 streak=1
	// subjects: 0
}
