package worker_test

import (
	"github.com/agentforeman/foreman/health/healthmock"
	"github.com/golang/mock/gomock"
)

func workermockHealth(ctrl *gomock.Controller) *healthmock.MockEscalator {
	return healthmock.NewMockEscalator(ctrl)
}
