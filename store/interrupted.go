package store

import (
	"context"
	"fmt"
)

// UpgradeInterruptedError is an upgrade of the schema stopped in one of
// its steps, by the context ending (Ctrl-C, SIGTERM): the step's
// transaction rolled back, the steps before it stay committed, and the next
// open resumes at the step that was stopped. Err is the context's error.
type UpgradeInterruptedError struct {
	Step string // the migration's file name, e.g. 0009_packed_content.sql
	Err  error
}

func (e *UpgradeInterruptedError) Error() string {
	return fmt.Sprintf("stopped while upgrading the database schema (at %s): nothing of that step was kept; "+
		"the upgrade resumes at the next start", e.Step)
}

func (e *UpgradeInterruptedError) Unwrap() error { return e.Err }

// stepFailed is the error of migration step when it failed with err: the
// step interrupted, when ctx has ended, else err as it is.
func stepFailed(ctx context.Context, step string, err error) error {
	if ctx.Err() != nil {
		return &UpgradeInterruptedError{Step: step, Err: context.Cause(ctx)}
	}
	return err
}
