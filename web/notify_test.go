package web

import (
	"testing"
	"time"
)

func TestBroadcast_notificationBeforeWaitIsNotLost(t *testing.T) {
	var b broadcast
	seen := b.current()
	b.notify() // arrives while the follower reads the store
	select {
	case <-b.after(seen):
	case <-time.After(time.Second):
		t.Fatal("a notification between reading and waiting was lost")
	}
	seen = b.current()
	ch := b.after(seen)
	select {
	case <-ch:
		t.Fatal("woken without a notification")
	default:
	}
	b.notify()
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("waiter not woken")
	}
}
