package cmd

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/capturedev/capture/server/api/resend/resendtest"
)

// A replay and a forwarded delivery send a capture exactly as it arrived:
// no header it lacked, nothing it had but the connection's, under the
// target's base path however its path climbs, and the target's answer as
// the target sent it (SPEC §8 Replay, §9).
func TestReplayAndForwardSendWhatWasCaptured(t *testing.T) {
	clearCaptureEnv(t)
	dir := filepath.Join(t.TempDir(), "data")
	_, banner := startServeProcess(t, dir)
	api, key, captureURL := banner["Read API"], banner["API key"], banner["Capture URL"]
	u, _ := url.Parse(captureURL)
	endpoint := strings.TrimPrefix(u.Path, "/")

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"received":true}`))
	zw.Close()
	target := resendtest.NewRecorder(t, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Type: application/json\r\n"+
		"Content-Length: "+strconv.Itoa(gz.Len())+"\r\n\r\n"+gz.String())
	if r := capture(t, "endpoint", "set", endpoint, "--target", target.URL()+"/base", "--data-dir", dir); r.code != 0 {
		t.Fatal(r)
	}

	// The sender writes its request by hand: no User-Agent, no
	// Accept-Encoding, a path that climbs, a header its Connection names.
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "POST /"+endpoint+"/../../admin?x=1 HTTP/1.1\r\nHost: "+u.Host+"\r\n"+
		"X-Signature: t=1,v1=abc\r\nContent-Type: application/json\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n"+
		"Content-Length: 7\r\n\r\n{\"a\":1}")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	var captured struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&captured)
	c.Close()
	if resp.StatusCode != 200 || captured.ID == "" {
		t.Fatalf("capture: %d %+v", resp.StatusCode, captured)
	}

	want := "POST /base/admin?x=1 HTTP/1.1\r\nHost: " + target.Host() + "\r\nContent-Length: 7\r\n" +
		"Content-Type: application/json\r\nX-Signature: t=1,v1=abc\r\n\r\n{\"a\":1}"

	req, _ := http.NewRequest("POST", api+"/requests/"+captured.ID+"/replay", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var replayed struct {
		Request struct {
			URL     string              `json:"url"`
			Headers map[string][]string `json:"headers"`
		} `json:"request"`
		Response struct {
			Headers    map[string][]string `json:"headers"`
			BodyBase64 string              `json:"body_base64"`
		} `json:"response"`
	}
	json.NewDecoder(resp.Body).Decode(&replayed)
	resp.Body.Close()
	if got := <-target.Requests(); got != want {
		t.Errorf("replay arrived as\n%q\nwant\n%q", got, want)
	}
	body, _ := base64.StdEncoding.DecodeString(replayed.Response.BodyBase64)
	if resp.StatusCode != 201 || replayed.Request.URL != target.URL()+"/base/admin?x=1" || len(replayed.Request.Headers) != 2 ||
		!bytes.Equal(body, gz.Bytes()) || replayed.Response.Headers["Content-Encoding"][0] != "gzip" {
		t.Errorf("replay answer: %d %+v", resp.StatusCode, replayed)
	}

	// capture forward sends the same bytes.
	fwd := exec.CommandContext(t.Context(), binary, "forward", "--data-dir", dir, "--endpoint", endpoint,
		"--to", target.URL()+"/base", "--replay-last", "1")
	stdout, _ := fwd.StdoutPipe()
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	if got := <-target.Requests(); got != want {
		t.Errorf("forward arrived as\n%q\nwant\n%q", got, want)
	}
	// Stopped once it has reported the delivery, not while it reads the
	// answer.
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.Contains(sc.Text(), "→ 200") {
		out.WriteString(sc.Text() + "\n")
	}
	fwd.Process.Signal(syscall.SIGINT)
	rest, _ := io.ReadAll(stdout)
	out.Write(rest)
	if err := fwd.Wait(); err != nil || !strings.Contains(out.String(), "1 forwarded") {
		t.Errorf("forward: %v\n%s", err, out.String())
	}
}
