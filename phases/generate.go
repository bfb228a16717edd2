package phases

// Mocks for unit tests, in phasesmock. The handler interfaces are the
// non-generic ones: mockgen v1.6.0 cannot parse generics.
//go:generate go tool mockgen -destination=phasesmock/services.go -package=phasesmock github.com/agentforeman/foreman/phases AgentDriver,Snapshotter,Verifier,FeedbackGenerator,ResultPersister
//go:generate go tool mockgen -destination=phasesmock/handlers.go -package=phasesmock github.com/agentforeman/foreman/phases BuildHandler,SnapshotHandler,VerifyHandler,FeedbackHandler
