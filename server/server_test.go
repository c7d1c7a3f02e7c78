package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capturedev/capture/server"
	"github.com/capturedev/capture/server/servertest"
	"github.com/capturedev/capture/store/storetest"
)

func config(t *testing.T) server.Config {
	t.Helper()
	cfg := servertest.Config(t)
	cfg.SMTPTLSAddrs = []string{"127.0.0.1:0"}
	cfg.Downloads = map[string][]byte{"tool.py": []byte("print('hi')\n")}
	return cfg
}

func TestRunServesEveryListenerAndStops(t *testing.T) {
	st := storetest.Store(t)
	boot, err := st.EnsureBootstrap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(t)
	cfg.PublicURL = "https://hooks.example.test/"
	srv, err := server.Listen(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if srv.CaptureBase() != "https://hooks.example.test" {
		t.Errorf("capture base %q", srv.CaptureBase())
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	httpBase := strings.TrimSuffix(srv.APIBase(), "/api/v1")
	if code, body := get(httpBase + "/downloads/tool.py"); code != 200 || body != "print('hi')\n" {
		t.Errorf("download: %d %q", code, body)
	}
	if code, body := get(httpBase + "/"); code != 200 || !strings.Contains(body, "<title>Sign in · capture</title>") {
		t.Errorf("root page: %d %q", code, body)
	}
	if code, _ := get(srv.APIBase() + "/schema/"); code != 200 {
		t.Errorf("schema: %d", code)
	}
	resp, err := http.Post("http://"+srv.CaptureAddr().String()+"/"+boot.Endpoint.ID+"/x", "text/plain", strings.NewReader("hi"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("capture: %v %v", resp, err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest("POST", srv.EmailAPIBase()+"/emails",
		strings.NewReader(`{"from":"a@example.com","to":"b@example.com","subject":"s","text":"t"}`))
	req.Header.Set("Authorization", "Bearer "+boot.Inbox.SMTPPassword)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("email api: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	for _, a := range append(srv.StartTLSAddrs(), srv.TLSAddrs()...) {
		c, err := net.Dial("tcp", a.String())
		if err != nil {
			t.Fatalf("smtp %s: %v", a, err)
		}
		c.Close()
	}

	// A long-poll in progress does not hold shutdown up.
	waitDone := make(chan struct{})
	go func() {
		defer close(waitDone)
		req, _ := http.NewRequest("GET", srv.APIBase()+"/endpoints/"+boot.Endpoint.ID+"/requests?wait=30&path=/never", nil)
		req.Header.Set("Authorization", "Bearer "+boot.Secret)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	time.Sleep(100 * time.Millisecond) // let the wait reach the server
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	<-waitDone
	if _, err := net.Dial("tcp", srv.HTTPAddr().String()); err == nil {
		t.Error("HTTP listener still accepting after shutdown")
	}
	if _, err := net.Dial("tcp", strings.TrimPrefix(srv.EmailAPIBase(), "http://")); err == nil {
		t.Error("email API listener still accepting after shutdown")
	}
}

func TestListenNamesAPortInUse(t *testing.T) {
	st := storetest.Store(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, flag := range []string{"--http", "--capture", "--smtp-starttls", "--smtp-tls", "--email-api"} {
		cfg := config(t)
		switch flag {
		case "--http":
			cfg.HTTPAddr = busy.Addr().String()
		case "--capture":
			cfg.CaptureAddr = busy.Addr().String()
		case "--smtp-starttls":
			cfg.SMTPStartTLSAddrs = []string{"127.0.0.1:0", busy.Addr().String()}
		case "--smtp-tls":
			cfg.SMTPTLSAddrs = []string{busy.Addr().String()}
		case "--email-api":
			cfg.EmailAPIAddr = busy.Addr().String()
		}
		_, err := server.Listen(st, cfg)
		if err == nil || !strings.Contains(err.Error(), flag+" "+busy.Addr().String()) || !strings.Contains(err.Error(), "in use") {
			t.Errorf("%s: %v", flag, err)
		}
	}
	// What was bound before the failure is released again.
	free, _ := net.Listen("tcp", "127.0.0.1:0")
	freeAddr := free.Addr().String()
	free.Close()
	cfg := config(t)
	cfg.HTTPAddr, cfg.CaptureAddr = freeAddr, busy.Addr().String()
	if _, err := server.Listen(st, cfg); err == nil {
		t.Fatal("listen succeeded on a busy port")
	}
	l, err := net.Listen("tcp", freeAddr)
	if err != nil {
		t.Fatalf("--http %s not released after a failed Listen: %v", freeAddr, err)
	}
	l.Close()
}
