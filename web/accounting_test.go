package web

import (
	"math"
	"testing"
	"time"
)

func TestSpendSince_billsEachInstanceForItsHoursInTheMonth(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	start := monthStart(now)
	at := func(month time.Month, day, hour int) time.Time {
		return time.Date(2026, month, day, hour, 0, 0, 0, time.UTC)
	}
	ptr := func(t time.Time) *time.Time { return &t }
	for _, tc := range []struct {
		name string
		in   BilledInstance
		want float64
	}{
		{"created last month and still running is billed from the month's start", BilledInstance{Price: 0.5, From: at(10, 1, 0)}, 0.5 * (21*24 + 12)},
		{"finished mid-month is billed until it finished", BilledInstance{Price: 1, From: at(10, 31, 12), To: ptr(at(11, 10, 0))}, 9 * 24},
		{"started after the month's start is billed from its start", BilledInstance{Price: 2, From: at(11, 22, 9)}, 2 * 3},
		{"finished last month costs nothing", BilledInstance{Price: 3, From: at(10, 1, 0), To: ptr(at(10, 20, 0))}, 0},
		{"a finish time after now is cut at now", BilledInstance{Price: 1, From: at(11, 22, 10), To: ptr(at(11, 23, 0))}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := spendSince([]BilledInstance{tc.in}, start, now); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("spend = %g, want %g", got, tc.want)
			}
		})
	}
}

func TestMonthStart_isMidnightUTCOfTheFirstDay(t *testing.T) {
	in := time.Date(2026, 12, 1, 0, 30, 0, 0, time.FixedZone("CET", 3600)) // 30 Nov 23:30 UTC
	if got, want := monthStart(in), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("monthStart(%s) = %s, want %s", in, got, want)
	}
}
