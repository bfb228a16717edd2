package teamweb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamweb"
)

// A host mounts the team's page under /team/ and prints where a person
// opens it. Here a client reads the status as JSON, and an action without
// the token is refused.
func Example() {
	dir, err := os.MkdirTemp("", "teamweb-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command("sh", "-c", "git init -q -b main && git commit -q --allow-empty -m start")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Example", "GIT_AUTHOR_EMAIL=example@foreman.invalid",
		"GIT_COMMITTER_NAME=Example", "GIT_COMMITTER_EMAIL=example@foreman.invalid")
	if out, err := cmd.CombinedOutput(); err != nil {
		panic(fmt.Sprintf("%v: %s", err, out))
	}

	// The agent never runs here: the team is only watched.
	agent := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		panic(err)
	}

	ctx := context.Background()
	t, err := team.New(ctx, team.Config{
		Repo:  dir,
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{agent, "{prompt}"}}),
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests,
			Checks: []phases.GateCheck{{Name: "test", Argv: []string{"true"}}}}}},
	})
	if err != nil {
		panic(err)
	}
	defer t.Close()
	err = t.Add(ctx, team.Story{ID: "US-001", Title: "Parse the config"},
		team.Story{ID: "US-002", Title: "Validate it", After: []foreman.ItemID{"US-001"}})
	if err != nil {
		panic(err)
	}

	token := teamweb.NewToken()
	page, err := teamweb.New(t, teamweb.Config{Token: token})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/team/", http.StripPrefix("/team", page))
	srv := httptest.NewServer(mux) // a host: http.ListenAndServe("127.0.0.1:8080", mux)
	defer srv.Close()
	// The host prints srv.URL + "/team/#token=" + token for the person.

	// Reading the team needs the token too (the page sends it).
	req, err := http.NewRequest("GET", srv.URL+"/team/api/status", nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set("X-Foreman-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	var st teamweb.StatusResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		panic(err)
	}
	resp.Body.Close()
	for _, s := range st.Stories {
		fmt.Println(s.ID, s.State, "after", s.After)
	}
	fmt.Println("events so far:", st.Seq)

	resp, err = http.PostForm(srv.URL+"/team/api/resolve", url.Values{"story": {"US-001"}, "action": {"retry"}})
	if err != nil {
		panic(err)
	}
	var refusal teamweb.ErrorResponse
	if err := json.NewDecoder(resp.Body).Decode(&refusal); err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, refusal.Code+":", strings.SplitN(refusal.Error, ":", 2)[0])
	// Output:
	// US-001 pending after []
	// US-002 pending after [US-001]
	// events so far: 2
	// 401 no_token: an action needs the token
}
