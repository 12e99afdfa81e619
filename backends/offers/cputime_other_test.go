//go:build !linux

package offers

import "time"

// threadCPU is unavailable off Linux; CPU ratios then read 0/0.
func threadCPU() time.Duration { return 0 }
