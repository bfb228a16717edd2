package ghland

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/atomicfile"
)

// record is what the Lander keeps of a story, one JSON file per story in
// Config.StateDir, written whole with internal/atomicfile (a temporary
// file, synced, renamed over it, the directory synced): a crash leaves
// the old or the new one.
type record struct {
	// PR is the story's pull request, recorded as soon as it exists and
	// before anything is done with it.
	PR int `json:"pr,omitempty"`
	// Head is the commit pushed last: the landing waits on its checks.
	Head string `json:"head,omitempty"`
	// Landing: Watch follows the pull request.
	Landing bool `json:"landing,omitempty"`
	// ChecksDone: the checks of Head have all passed; Reviewed: the
	// reviews were read since.
	ChecksDone bool `json:"checksDone,omitempty"`
	Reviewed   bool `json:"reviewed,omitempty"`
	// Merging is set before the merge is asked for; Merged is the merge
	// commit once it is known.
	Merging bool   `json:"merging,omitempty"`
	Merged  string `json:"merged,omitempty"`
	// ClosedAt is the closing of the pull request a person did that was
	// reported (its closed_at): a Merge after it (the person resumed the
	// story) reopens the pull request.
	ClosedAt string `json:"closedAt,omitempty"`
	// Reviews are the reviews requesting changes already reported.
	Reviews []int64 `json:"reviews,omitempty"`
	// Polls counts Watch's looks (which request a look sends); Updated is
	// the pull request's updated_at last seen.
	Polls   int    `json:"polls,omitempty"`
	Updated string `json:"updated,omitempty"`
}

func (l *Lander) recordPath(item foreman.ItemID) string {
	return filepath.Join(l.cfg.StateDir, string(item)+".json")
}

func (l *Lander) load(item foreman.ItemID) (record, error) {
	var rec record
	data, err := os.ReadFile(l.recordPath(item))
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return rec, err
	}
	return rec, json.Unmarshal(data, &rec)
}

func (l *Lander) save(item foreman.ItemID, rec record) error {
	return atomicfile.WriteJSON(l.recordPath(item), rec, 0o644)
}

// landings lists the stories Watch follows.
func (l *Lander) landings() ([]foreman.ItemID, error) {
	ents, err := os.ReadDir(l.cfg.StateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []foreman.ItemID
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(name, ".") {
			continue
		}
		item := foreman.ItemID(name)
		if item.Validate() != nil {
			continue
		}
		rec, err := l.load(item)
		if err != nil {
			return nil, err
		}
		if rec.Landing {
			out = append(out, item)
		}
	}
	slices.Sort(out)
	return out, nil
}
