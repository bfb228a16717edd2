package phases

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/agentforeman/foreman/internal/atomicfile"
	"github.com/agentforeman/foreman/internal/ids"
)

// ResultPersister stores what a run produced. Every method returns where it
// stored the value (a path, a key) or an error. The phases and the RunLoop
// log a persistence error and carry on: losing a record never fails a run.
type ResultPersister interface {
	SaveAgentResult(ctx context.Context, runID RunID, iteration int, result AgentResult) (string, error)
	SaveVerificationReport(ctx context.Context, runID RunID, iteration int, report VerificationReport) (string, error)
	SaveIteration(ctx context.Context, runID RunID, record IterationRecord) (string, error)
	SaveRun(ctx context.Context, result RunResult) (string, error)
}

// FilePersister writes JSON files, atomically, under a root directory:
//
//	<root>/<run id>/run.json
//	<root>/<run id>/iteration-001/agent.json
//	<root>/<run id>/iteration-001/verification.json
//	<root>/<run id>/iteration-001/iteration.json
//
// A run id must be a valid id (see foreman.ItemID) because it becomes a
// directory name. Writing the same record again replaces it.
type FilePersister struct {
	root string
}

// NewFilePersister returns a persister writing under root, which is created
// on the first write.
func NewFilePersister(root string) *FilePersister { return &FilePersister{root: root} }

// Root returns the directory the persister writes under.
func (p *FilePersister) Root() string { return p.root }

// SaveAgentResult writes agent.json for the iteration.
func (p *FilePersister) SaveAgentResult(ctx context.Context, runID RunID, iteration int, result AgentResult) (string, error) {
	return p.write(ctx, runID, iteration, "agent.json", result)
}

// SaveVerificationReport writes verification.json for the iteration.
func (p *FilePersister) SaveVerificationReport(ctx context.Context, runID RunID, iteration int, report VerificationReport) (string, error) {
	return p.write(ctx, runID, iteration, "verification.json", report)
}

// SaveIteration writes iteration.json for record.Iteration.
func (p *FilePersister) SaveIteration(ctx context.Context, runID RunID, record IterationRecord) (string, error) {
	return p.write(ctx, runID, record.Iteration, "iteration.json", record)
}

// SaveRun writes run.json.
func (p *FilePersister) SaveRun(ctx context.Context, result RunResult) (string, error) {
	return p.write(ctx, result.RunID, 0, "run.json", result)
}

func (p *FilePersister) write(ctx context.Context, runID RunID, iteration int, name string, v any) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := ids.Validate("run", string(runID)); err != nil {
		return "", fmt.Errorf("phases: persist %s: %w", name, err)
	}
	if iteration < 0 {
		return "", fmt.Errorf("phases: persist %s: negative iteration %d", name, iteration)
	}
	dir := filepath.Join(p.root, string(runID))
	if iteration > 0 {
		dir = filepath.Join(dir, fmt.Sprintf("iteration-%03d", iteration))
	}
	path := filepath.Join(dir, name)
	if err := atomicfile.WriteJSON(path, v, 0o644); err != nil {
		return "", fmt.Errorf("phases: persist %s: %w", name, err)
	}
	return path, nil
}
