package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func get(t *testing.T, q *Queue[string], within time.Duration) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return q.Get(ctx)
}

func TestQueue_addDeduplicatesReadyKeys(t *testing.T) {
	q := New[string](time.Millisecond, time.Second, time.Now)
	q.Add("a")
	q.Add("a")
	q.Add("b")
	if n := q.Len(); n != 2 {
		t.Fatalf("Len = %d, want 2", n)
	}
	k, _ := get(t, q, time.Second)
	if k != "a" {
		t.Fatalf("first key %q, want a (FIFO)", k)
	}
}

func TestQueue_keyAddedWhileProcessingComesBackAfterDone(t *testing.T) {
	q := New[string](time.Millisecond, time.Second, time.Now)
	q.Add("a")
	k, _ := get(t, q, time.Second)
	q.Add("a") // while processing: must not be handed to a second worker
	if _, ok := get(t, q, 20*time.Millisecond); ok {
		t.Fatal("key handed out twice while in flight")
	}
	q.Done(k)
	if k2, ok := get(t, q, time.Second); !ok || k2 != "a" {
		t.Fatalf("dirty key not re-queued after Done: %q %v", k2, ok)
	}
}

func TestQueue_addAfterWaits(t *testing.T) {
	q := New[string](time.Millisecond, time.Second, time.Now)
	start := time.Now()
	q.AddAfter("a", 30*time.Millisecond)
	if _, ok := get(t, q, 5*time.Millisecond); ok {
		t.Fatal("delayed key ready too early")
	}
	if k, ok := get(t, q, time.Second); !ok || k != "a" {
		t.Fatalf("delayed key never ready: %q %v", k, ok)
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Fatal("delayed key ready before its delay")
	}
}

func TestQueue_backOffDoublesAndForgetResets(t *testing.T) {
	q := New[string](10*time.Millisecond, 40*time.Millisecond, time.Now)
	want := []time.Duration{10, 20, 40, 40}
	for i, w := range want {
		if d := q.AddRateLimited("a"); d != w*time.Millisecond {
			t.Fatalf("attempt %d: back-off %v, want %v", i, d, w*time.Millisecond)
		}
	}
	q.AddRateLimited("b")
	if n := q.BackingOff(); n != 2 {
		t.Fatalf("BackingOff = %d, want 2 (a and b failed)", n)
	}
	q.Forget("a")
	if n := q.BackingOff(); n != 1 {
		t.Fatalf("BackingOff after Forget(a) = %d, want 1", n)
	}
	if d := q.AddRateLimited("a"); d != 10*time.Millisecond {
		t.Fatalf("after Forget: back-off %v, want 10ms", d)
	}
}

func TestQueue_oneWorkerPerKeyUnderConcurrency(t *testing.T) {
	q := New[int](time.Millisecond, time.Second, time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	var inFlight [10]atomic.Int32
	var processed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, ok := q.Get(ctx)
				if !ok {
					return
				}
				if inFlight[k].Add(1) != 1 {
					t.Errorf("key %d processed by two workers at once", k)
				}
				time.Sleep(100 * time.Microsecond)
				inFlight[k].Add(-1)
				processed.Add(1)
				q.Done(k)
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		q.Add(i % 10)
	}
	deadline := time.Now().Add(5 * time.Second)
	for q.Len() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	cancel()
	q.Close()
	wg.Wait()
	if processed.Load() == 0 {
		t.Fatal("nothing processed")
	}
}

func TestQueue_getReturnsWhenContextEnds(t *testing.T) {
	q := New[string](time.Millisecond, time.Second, time.Now)
	if _, ok := get(t, q, 10*time.Millisecond); ok {
		t.Fatal("Get on an empty queue returned a key")
	}
}
