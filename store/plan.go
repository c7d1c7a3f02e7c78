package store

import (
	"fmt"
	"strings"
	"time"
)

// Plan is a named set of quotas (SPEC §5).
type Plan struct {
	Name                  string
	APIKeys               int64
	Inboxes               int64
	Endpoints             int64
	Retention             time.Duration
	CapturesPerCollection int64
	MessageBytes          int64
	RequestBodyBytes      int64
	ConcurrentWaits       int
	RequestsPerSecond     int
}

// Burst is how many API requests a key may make at once before the
// per-second rate applies.
func (p Plan) Burst() int { return 2 * p.RequestsPerSecond }

const (
	day = 24 * time.Hour
	mib = 1 << 20
)

var plans = []Plan{
	{Name: "free", APIKeys: 1, Inboxes: 5, Endpoints: 5, Retention: 7 * day, CapturesPerCollection: 10_000,
		MessageBytes: 10 * mib, RequestBodyBytes: 1 * mib, ConcurrentWaits: 4, RequestsPerSecond: 50},
	{Name: "pro", APIKeys: 5, Inboxes: 50, Endpoints: 50, Retention: 30 * day, CapturesPerCollection: 100_000,
		MessageBytes: 25 * mib, RequestBodyBytes: 10 * mib, ConcurrentWaits: 4, RequestsPerSecond: 200},
	{Name: "team", APIKeys: 50, Inboxes: 500, Endpoints: 500, Retention: 90 * day, CapturesPerCollection: 1_000_000,
		MessageBytes: 50 * mib, RequestBodyBytes: 25 * mib, ConcurrentWaits: 4, RequestsPerSecond: 1000},
}

// PlanNames lists the plans in ascending order.
func PlanNames() []string {
	names := make([]string, len(plans))
	for i, p := range plans {
		names[i] = p.Name
	}
	return names
}

// LookupPlan returns the plan called name.
func LookupPlan(name string) (Plan, error) {
	for _, p := range plans {
		if p.Name == name {
			return p, nil
		}
	}
	return Plan{}, fmt.Errorf("%w: unknown plan %q (want one of %s)", ErrInvalid, name, strings.Join(PlanNames(), ", "))
}
