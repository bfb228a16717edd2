// Command probe links every function that holds a mutant's guard, so that
// the package's test can look for the mutants in a plain build's binary.
package main

import (
	"fmt"

	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/worker"
)

func main() {
	fmt.Printf("%p %p %p %p %p\n", (*pipeline.Runtime).Handle, (*pipeline.Flow).Step,
		(*pipeline.DispatcherSpawner).Spawn, (*worker.Dispatcher).Submit, (*worker.Dispatcher).Deliver)
}
