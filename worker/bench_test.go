package worker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/worker"
)

// chanTransport hands every ASSIGN to a channel; other commands are dropped.
type chanTransport chan *worker.Assignment

func (c chanTransport) Send(_ context.Context, cmd worker.Command) error {
	if cmd.Kind == worker.CommandAssign {
		c <- cmd.Assign
	}
	return nil
}

// runPipeline pushes n items through submit and has consumers goroutines
// complete each handed-out unit with complete, returning when all are done.
func runPipeline(n, consumers int, units <-chan *worker.Assignment, submit func(i int), complete func(*worker.Assignment)) {
	var left atomic.Int64
	left.Store(int64(n))
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range consumers {
		wg.Go(func() {
			for {
				select {
				case a := <-units:
					complete(a)
					if left.Add(-1) == 0 {
						close(done)
					}
				case <-done:
					return
				}
			}
		})
	}
	for i := range n {
		submit(i)
	}
	<-done
	wg.Wait()
}

// BenchmarkAssignNoop2000Workers measures the full assign cycle (Submit,
// queue, pool, fencing token, deadlines, ASSIGN, fenced DONE, release) with
// no-op work at 2,000 pooled workers. The baseline is the same producer and
// consumers passing the items over a bare channel, measured in the same run.
func BenchmarkAssignNoop2000Workers(b *testing.B) {
	const workers, consumers = 2000, 4
	ids := make([]foreman.ItemID, b.N)
	for i := range ids {
		ids[i] = foreman.ItemID(fmt.Sprintf("item-%d", i))
	}
	// Baseline: a bare channel handoff.
	base := make(chan *worker.Assignment, workers)
	start := time.Now()
	runPipeline(b.N, consumers, base, func(i int) { base <- &worker.Assignment{Item: ids[i]} }, func(*worker.Assignment) {})
	baseline := time.Since(start)

	tr := make(chanTransport, workers)
	d, err := worker.New(worker.Config{MaxWorkers: workers, Transport: tr, Clock: foreman.NewFakeClock(t0), AssignmentPrefix: "a"})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	b.ResetTimer()
	start = time.Now()
	runPipeline(b.N, consumers, tr,
		func(i int) {
			if err := d.Submit(ctx, worker.Item{ID: ids[i]}); err != nil {
				b.Error(err)
			}
		},
		func(a *worker.Assignment) {
			if disp, err := d.Deliver(ctx, worker.Message{Kind: worker.MsgDone, Worker: a.Worker, Assignment: a.ID}); disp != worker.Applied {
				b.Errorf("%v %v", disp, err)
			}
		})
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "assignments/s")
	b.ReportMetric(float64(elapsed)/float64(baseline), "x-channel-baseline")
}

// BenchmarkHeartbeat100kWorkers measures one fenced heartbeat through
// Deliver with 100,000 busy workers, against the baseline of
// health.Deadlines.Heartbeat alone on 100,000 subjects, in the same run.
func BenchmarkHeartbeat100kWorkers(b *testing.B) {
	const n = 100_000
	clk := foreman.NewFakeClock(t0)
	dl := health.NewDeadlines(health.DeadlineConfig{Clock: clk})
	defer dl.Close()
	subjects := make([]foreman.AssignmentID, n)
	for i := range subjects {
		subjects[i] = foreman.AssignmentID(fmt.Sprintf("s%d", i))
		_ = dl.Add(subjects[i])
	}
	bn := b.N
	start := time.Now()
	for i := range bn {
		_ = dl.Heartbeat(subjects[i%n])
	}
	baseline := time.Since(start)

	tr := make(chanTransport, n)
	d, err := worker.New(worker.Config{MaxWorkers: n, Transport: tr, Clock: clk, AssignmentPrefix: "a"})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	msgs := make([]worker.Message, n)
	for i := range n {
		if err := d.Submit(ctx, worker.Item{ID: foreman.ItemID(fmt.Sprintf("item-%d", i))}); err != nil {
			b.Fatal(err)
		}
		a := <-tr
		msgs[i] = worker.Message{Kind: worker.MsgHeartbeat, Worker: a.Worker, Assignment: a.ID}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start = time.Now()
	for i := range bn {
		if disp, _ := d.Deliver(ctx, msgs[i%n]); disp != worker.Applied {
			b.Fatal(disp)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(elapsed)/float64(baseline), "x-deadlines-baseline")
}
