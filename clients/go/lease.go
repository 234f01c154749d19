package dlock

import (
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// DefaultClockDrift is the clock-rate allowance when neither Config.ClockDrift nor
// DLOCK_CLOCK_DRIFT sets one (1 %).
const DefaultClockDrift = 0.01

// TrustedTTL is the TTL a lease is trusted for: a server answering more than was asked never
// lengthens the client's trust. asked 0: the server's default was asked for, so the answer.
func TrustedTTL(asked, answered time.Duration) time.Duration {
	if asked <= 0 {
		return answered
	}
	if answered <= 0 {
		return asked
	}
	return min(asked, answered)
}

// LeaseDeadline is the time until which a lease of ttl whose request was sent at sentAt is
// believed (ADR-0012): sentAt + ttl - ceil(ttl × clockDrift), in whole milliseconds. sentAt
// should come from time.Now, whose monotonic reading the deadline keeps.
func LeaseDeadline(sentAt time.Time, ttl time.Duration, clockDrift float64) time.Time {
	ttlMs := ttl.Milliseconds()
	allowanceMs := int64(math.Ceil(float64(ttlMs) * clockDrift))
	return sentAt.Add(time.Duration(ttlMs-allowanceMs) * time.Millisecond)
}

// backoffDelay is the pause before retry attempt (0 = the first): with
// d = min(max, initial × 2^attempt), a value in [d/2, d]. The random half keeps clients that
// failed together from retrying in lock-step; the fixed half keeps it from collapsing to zero.
func backoffDelay(initial, maximum time.Duration, attempt int, random float64) time.Duration {
	full := float64(initial) * math.Pow(2, float64(min(attempt, 30)))
	full = min(full, float64(maximum))
	return time.Duration(full/2 + full/2*random)
}

// parseClockDrift reads "0.01" or "1%": a fraction in [0, 0.5).
func parseClockDrift(text, field string) (float64, error) {
	number := strings.TrimSpace(text)
	percent := strings.HasSuffix(number, "%")
	value, err := strconv.ParseFloat(strings.TrimSuffix(number, "%"), 64)
	if err != nil {
		value = -1
	}
	if percent {
		value /= 100
	}
	if !(value >= 0 && value < 0.5) {
		return 0, invalid(field, "%s: %q is not a clock-rate allowance in [0, 0.5), e.g. 0.01 or 1%%", field, text)
	}
	return value, nil
}

// resolveClockDrift: the option (when not 0), else DLOCK_CLOCK_DRIFT, else DefaultClockDrift.
func resolveClockDrift(option float64) (float64, error) {
	if option != 0 {
		if !(option > 0 && option < 0.5) {
			return 0, invalid("clock_drift", "clock_drift: the clock-rate allowance must be a fraction in [0, 0.5), e.g. 0.01")
		}
		return option, nil
	}
	if env := strings.TrimSpace(os.Getenv("DLOCK_CLOCK_DRIFT")); env != "" {
		return parseClockDrift(env, "DLOCK_CLOCK_DRIFT")
	}
	return DefaultClockDrift, nil
}
