package modeltest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentforeman/foreman/modeltest"
)

// A scripted conversation: the first request gets a shell command, the one
// carrying its result gets the final text. A real CLI would be pointed at
// srv.URL(); here one request is made by hand, without streaming.
func Example() {
	srv, err := modeltest.New(modeltest.Config{Scripts: []modeltest.Script{{
		Match: "greet",
		Turns: []modeltest.Turn{
			modeltest.Do(modeltest.Shell("echo hello > greeting.txt")),
			{When: "completed", Text: "Done: greeting.txt says hello."},
		},
	}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	body, _ := json.Marshal(map[string]any{
		"model":    "claude-test",
		"messages": []any{map[string]any{"role": "user", "content": "Please greet the world."}},
		"tools":    []any{map[string]any{"name": "Bash"}},
	})
	resp, err := http.Post(srv.URL()+"/v1/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var msg struct {
		Content []struct {
			Type  string         `json:"type"`
			Name  string         `json:"name"`
			Input map[string]any `json:"input"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(msg.StopReason, msg.Content[0].Name, msg.Content[0].Input["command"])

	r := srv.Requests()[0]
	fmt.Printf("turn %d of %q, tools %v, served %+v\n", r.Turn, r.Script, r.Tools, r.Served.Usage)
	// Output:
	// tool_use Bash echo hello > greeting.txt
	// turn 0 of "script 1", tools [Bash], served {InputTokens:100 OutputTokens:20 CacheCreationInputTokens:0 CacheReadInputTokens:0}
}
