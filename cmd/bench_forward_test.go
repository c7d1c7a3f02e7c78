package cmd

import (
	"os/exec"
	"regexp"
	"testing"
)

// bench forward runs each forwarding client as a user would, against its
// own server, and reports the capture-to-handler latency.
func TestBenchForward(t *testing.T) {
	client := "both"
	if _, err := exec.LookPath("python3"); err != nil {
		t.Log("no python3: the Python client's figure is NOT measured")
		client = "go"
	}
	r := capture(t, "bench", "forward", "--n", "3", "--client", client)
	line := regexp.MustCompile(`(?m)^forward \((go|python) client, default interval, 3 captures\): capture → handler p50 \d+\.\d\d ms p99 \d+\.\d\d ms max \d+\.\d\d ms$`)
	if r.code != 0 || len(line.FindAllString(r.stdout, -1)) != map[string]int{"both": 2, "go": 1}[client] {
		t.Errorf("bench forward: %+v", r)
	}
	if r := capture(t, "bench", "forward", "--client", "ruby"); r.code != 2 {
		t.Errorf("bad client: %+v", r)
	}
}
