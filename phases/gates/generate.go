package gates

//go:generate go tool mockgen -destination gatesmock/mocks.go -package gatesmock github.com/agentforeman/foreman/phases/gates Sandbox
