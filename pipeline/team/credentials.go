package team

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/store"
)

// Each assignment's agent proves which assignment it is by what only that
// assignment was given: its MCP bearer token (agentmcp issues one per
// assignment, mcp.go), the directory its result file lives in, whose name
// no other agent can guess, and the report key its printed report line
// must carry (printed.go). The directory's name and the key are derived
// from a secret the team keeps in its store (HMAC-SHA256 of the assignment
// id under kindSecret's key), so that they are the same for an assignment
// that runs again after a restart of its host, and on a worker host of a
// team spread over several (NewStageAgent: the coordinator renders the
// prompt that names them, the worker host runs the agent). An agent's
// sandbox shows it its own result directory only; without a sandbox, an
// agent running as the host's user can read the team's store, and these
// proofs hold against what reaches an agent (a story's text, files,
// tools' answers), not against such an agent.

// kindSecret holds the team's secret (secretRecord, id secretID).
const (
	kindSecret = "team.secret"
	secretID   = "assignments"
)

// EnvReportKey names the agent's report key in its environment: a printed
// report line is taken only with it (see DefaultPrompt).
const EnvReportKey = "FOREMAN_REPORT_KEY"

// resultsDir is the state directory's directory of result directories, and
// resultFile the result file's name in each.
const (
	resultsDir = "results"
	resultFile = "result.json"
)

type secretRecord struct {
	Key string `json:"key"` // 32 random bytes, hex
}

// loadSecret reads the team's secret from db, making it the first time:
// 256 bits from crypto/rand. Two hosts making it at once agree on the one
// written first.
func loadSecret(ctx context.Context, db store.Store) ([]byte, error) {
	for range 3 {
		var rec secretRecord
		_, found, err := getJSON(ctx, db, kindSecret, secretID, &rec)
		if err != nil {
			return nil, err
		}
		if found {
			key, err := hex.DecodeString(rec.Key)
			if err != nil || len(key) < 32 {
				return nil, fmt.Errorf("team: corrupt %s record: not a 32-byte hex key", kindSecret)
			}
			return key, nil
		}
		var b [32]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		data, err := json.Marshal(secretRecord{Key: hex.EncodeToString(b[:])})
		if err != nil {
			return nil, err
		}
		_, err = db.Apply(ctx, store.Op{Kind: kindSecret, ID: secretID, Data: data})
		if err == nil {
			return b[:], nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("team: making the %s record: too many conflicts", kindSecret)
}

// credential is what proves one assignment's agent, besides its MCP token.
type credential struct {
	// Dir is the assignment's result directory,
	// <StateDir>/results/<assignment>-<32 hex>; the agent writes its
	// Report to ResultPath there.
	Dir string
	// Key is its report key (32 hex).
	Key string
}

// ResultPath is the result file's path.
func (c credential) ResultPath() string { return filepath.Join(c.Dir, resultFile) }

// derive returns HMAC-SHA256(secret, purpose 0 id), its first 128 bits in
// hex.
func derive(secret []byte, purpose, id string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// credentialOf returns the credential of id: an assignment id, or a
// reviewer's (credentialOf's caller names it).
func (t *Team) credentialOf(id string) credential {
	return credential{
		Dir: filepath.Join(t.cfg.StateDir, resultsDir, id+"-"+derive(t.secret, "result-dir", id)),
		Key: derive(t.secret, "report-key", id),
	}
}

func (t *Team) credential(a foreman.AssignmentID) credential { return t.credentialOf(string(a)) }

// makeResultsDir makes the state directory's results directory, readable
// by its owner only.
func makeResultsDir(stateDir string) error {
	dir := filepath.Join(stateDir, resultsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700) // one an earlier version made 0755
}

// openResultDir makes the assignment's result directory, empty, 0700, for
// an execution about to start: whatever an earlier, interrupted execution
// of the same assignment left there is not this one's evidence.
func openResultDir(c credential) error {
	if err := os.RemoveAll(c.Dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.Dir), 0o700); err != nil {
		return err
	}
	return os.Mkdir(c.Dir, 0o700)
}

// closeResultDir removes the result directory once its evidence is read.
func (t *Team) closeResultDir(c credential) {
	if err := os.RemoveAll(c.Dir); err != nil {
		t.log.Warn("team: removing a result directory", "dir", c.Dir, "err", err)
	}
}

// clearResults removes every result directory (and result files of
// earlier versions) when a Run starts: the Run holds the team's run lock,
// so no agent of the team is at work, and each execution makes its own
// again.
func (t *Team) clearResults() error {
	dir := filepath.Join(t.cfg.StateDir, resultsDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return makeResultsDir(t.cfg.StateDir)
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
