// Command capture catches the email and webhooks an application sends during
// development and CI, and lets tests, people and coding agents read them back.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/capturedev/capture/cmd"
	// Before Bubble Tea's init, which would ask the terminal a question.
	_ "github.com/capturedev/capture/cmd/quietterm"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cmd.Execute(ctx)
	stop()
	os.Exit(code)
}
