package teamnotify_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamnotify"
)

// A receiver checks each request's signature before it trusts the body.
func ExampleVerifySignature() {
	secret := []byte("a-shared-secret-of-32-bytes-----")
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := teamnotify.VerifySignature(secret, r.Header.Get(teamnotify.SignatureHeader), body, time.Now(), 0); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Println("verified", r.Header.Get(teamnotify.DeliveryHeader))
	}))
	defer receiver.Close()

	w, err := teamnotify.NewWebhook(teamnotify.WebhookConfig{URL: receiver.URL, Secret: secret})
	if err != nil {
		panic(err)
	}
	n, _ := teamnotify.Of("3f9a0c1b2d4e5f60", "/src/app", team.Event{Seq: 7, Kind: team.EventRunFinished, Detail: "6 merged, 0 paused"})
	if err := w.Notify(context.Background(), n); err != nil {
		fmt.Println(err)
	}
	// Output:
	// verified run_finished-7-3f9a0c1b2d4e5f60
}
