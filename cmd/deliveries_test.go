package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// Deliveries written through the API are capped in size and in count
// (SPEC §13): a field over its cap is refused naming it, nothing is
// stored, and a request keeps its newest 100.
func TestDeliveriesAreCapped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	_, banner := startServeProcess(t, dir)
	api, key, captureURL := banner["Read API"], banner["API key"], banner["Capture URL"]
	// Enough API calls per second for the test.
	if r := capture(t, "project", "set-plan", "default", "team", "--data-dir", dir); r.code != 0 {
		t.Fatal(r)
	}
	resp, err := http.Post(captureURL+"/hook", "text/plain", strings.NewReader("hi"))
	if err != nil {
		t.Fatal(err)
	}
	var captured struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&captured)
	resp.Body.Close()

	record := func(body string) (int, map[string]string) {
		req, _ := http.NewRequest("POST", api+"/requests/"+captured.ID+"/deliveries", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env struct {
			Error struct {
				Code   string            `json:"code"`
				Fields map[string]string `json:"fields"`
			} `json:"error"`
		}
		b, _ := io.ReadAll(resp.Body)
		json.Unmarshal(b, &env)
		if resp.StatusCode != 201 && env.Error.Code != "invalid_parameter" {
			t.Errorf("%d %s", resp.StatusCode, b)
		}
		return resp.StatusCode, env.Error.Fields
	}
	report := func(target, errText string, ms int) string {
		b, _ := json.Marshal(map[string]any{"target_url": target, "error": errText, "duration_ms": ms})
		return string(b)
	}
	long := "http://localhost:3000/" + strings.Repeat("a", 2048-len("http://localhost:3000/"))
	for _, tt := range []struct {
		name, body string
		field      string // "" when accepted
	}{
		{"error at its cap", report(long, strings.Repeat("é", 2048), 1), ""},
		{"error over its cap", report("http://localhost:3000/", strings.Repeat("x", 4097), 1), "error"},
		{"target_url over its cap", report(long+"a", "refused", 1), "target_url"},
		{"duration_ms over its cap", report("http://localhost:3000/", "timeout", 86_400_001), "duration_ms"},
		{"20 MB error", report("http://localhost:3000/", strings.Repeat("x", 20<<20), 1), "body"},
	} {
		status, fields := record(tt.body)
		if (tt.field == "") != (status == 201) || (tt.field != "" && fields[tt.field] == "") {
			t.Errorf("%s: %d %v", tt.name, status, fields)
		}
	}

	// Only the accepted one was stored; then the oldest go beyond 100.
	deliveries := func() []string {
		_, b := apiGet(t, api, key, "/requests/"+captured.ID)
		var r struct {
			Deliveries []struct {
				TargetURL string `json:"target_url"`
			} `json:"deliveries"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(r.Deliveries))
		for i, d := range r.Deliveries {
			out[i] = d.TargetURL
		}
		return out
	}
	if got := deliveries(); len(got) != 1 || got[0] != long {
		t.Fatalf("after the refused ones: %v", got)
	}
	for i := range 104 {
		if status, _ := record(report(fmt.Sprintf("http://localhost:3000/%d", i), "refused", 1)); status != 201 {
			t.Fatalf("delivery %d: %d", i, status)
		}
	}
	got := deliveries()
	if len(got) != 100 || got[0] != "http://localhost:3000/4" || got[99] != "http://localhost:3000/103" {
		t.Errorf("kept %d deliveries, from %q to %q; want the newest 100", len(got), got[0], got[len(got)-1])
	}
}
