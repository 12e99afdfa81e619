package store

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCapMessage_cutsLongMessagesSayingSo(t *testing.T) {
	if got := capMessage("short"); got != "short" {
		t.Errorf("short message changed: %q", got)
	}
	long := strings.Repeat("é", MaxEventMessageBytes)
	got := capMessage(long)
	if len(got) > MaxEventMessageBytes || !utf8.ValidString(got) || !strings.Contains(got, "more bytes cut") {
		t.Errorf("capped message: %d bytes, valid UTF-8 %v: %.80q", len(got), utf8.ValidString(got), got[len(got)-40:])
	}
}
