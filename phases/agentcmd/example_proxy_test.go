package agentcmd_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
)

// A proxy URL with credentials reaches the agent as a local proxy's
// address, without them: the driver's proxy on 127.0.0.1 adds them on the
// way to the real one, for this execution only. Credentials it cannot keep
// out (a SOCKS proxy's) fail before anything starts.
func ExampleProxyURLError() {
	dir, _ := os.MkdirTemp("", "agentcmd-proxy-example")
	defer os.RemoveAll(dir)
	run := func(proxy string) (phases.AgentResult, error) {
		driver := agentcmd.New(agentcmd.Config{
			Argv:    []string{"sh", "-c", `echo "$HTTPS_PROXY" | sed 's/:[0-9]*$/:PORT/'`},
			Env:     []string{"HTTPS_PROXY=" + proxy},
			Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxOff},
		})
		return driver.Execute(context.Background(), phases.AgentRequest{WorkspacePath: dir}, nil)
	}

	res, err := run("http://me:secret@proxy.corp.invalid:3128")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(res.Output)
	fmt.Println("secret shown:", strings.Contains(res.Output, "secret"))

	_, err = run("socks5://me:secret@proxy.corp.invalid:1080")
	var pe *agentcmd.ProxyURLError
	fmt.Println(errors.As(err, &pe), pe.Name)
	// Output:
	// http://127.0.0.1:PORT
	// secret shown: false
	// true HTTPS_PROXY
}
