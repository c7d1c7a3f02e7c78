package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/capturedev/capture/server"
	"github.com/capturedev/capture/store"
	"github.com/capturedev/capture/store/storetest"
)

// A collection past its plan's cap is pruned back as captures come in,
// not only once a PruneInterval: a free endpoint (10,000 captures) fed
// 11,500 ends within about a thousand of its cap, where an hourly pruner
// alone would leave all 11,500.
func TestPruneKeepsUpWithIngest(t *testing.T) {
	st := storetest.Store(t)
	boot, err := st.EnsureBootstrap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetPlan(t.Context(), boot.Project.ID, "free"); err != nil {
		t.Fatal(err)
	}
	cfg := config(t)
	cfg.PruneInterval = time.Hour
	srv, err := server.Listen(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	const sent, workers = 11_500, 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < sent; i += workers {
				if _, err := st.InsertRequest(t.Context(), &store.NewRequest{EndpointID: boot.Endpoint.ID, ReceivedAt: time.Now(),
					Method: "POST", Path: "/hook", Body: []byte("{}")}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var count int64
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ep, err := st.Endpoint(t.Context(), boot.Project.ID, boot.Endpoint.ID)
		if err != nil {
			t.Fatal(err)
		}
		if count = ep.RequestCount; count <= 11_000 {
			break
		}
	}
	if count > 11_000 || count < 10_000 {
		t.Errorf("endpoint holds %d captures after %d sent, want its cap of 10,000 and at most a thousand more", count, sent)
	}
}
