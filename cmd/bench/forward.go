package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Forwarding clients ForwardLatency can run.
const (
	ClientGo     = "go"
	ClientPython = "python"
)

// ForwardLatency measures, n times, how long after a capture is
// acknowledged to its sender a forwarding client has delivered it to a
// local handler. The client runs as a user runs it: `capture forward` of
// the server's binary, or the Python client downloaded from the server with
// python3, at its default interval. Captures are spaced by a random pause,
// so that they meet the client at every point of its pull.
func (t *Target) ForwardLatency(ctx context.Context, client string, n int) (Latency, error) {
	h, err := newArrivals()
	if err != nil {
		return Latency{}, err
	}
	defer h.close()

	var cmd *exec.Cmd
	switch client {
	case ClientGo:
		cmd = exec.Command(t.binary, "forward")
	case ClientPython:
		script, err := t.download(ctx, "capture-forward.py")
		if err != nil {
			return Latency{}, err
		}
		cmd = exec.Command("python3", script)
	default:
		return Latency{}, fmt.Errorf("client %q: want %s or %s", client, ClientGo, ClientPython)
	}
	cmd.Args = append(cmd.Args, "--api", t.API, "--endpoint", t.EndpointID, "--to", h.url, "--output", "json")
	cmd.Env = append(os.Environ(), "CAPTURE_API_KEY="+t.Key)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Latency{}, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return Latency{}, fmt.Errorf("start the %s client: %w", client, err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if !ok && strings.Contains(sc.Text(), `"type":"ready"`) {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case ok := <-ready:
		if !ok {
			return Latency{}, fmt.Errorf("the %s client stopped before it was ready: %s", client, strings.TrimSpace(stderr.String()))
		}
	case <-time.After(30 * time.Second):
		return Latency{}, fmt.Errorf("the %s client was not ready within 30 s: %s", client, strings.TrimSpace(stderr.String()))
	}

	web := &http.Client{Timeout: 30 * time.Second}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var lat []time.Duration
	start := time.Now()
	for i := range n {
		pause := time.NewTimer(time.Duration(20+rng.IntN(180)) * time.Millisecond)
		select {
		case <-ctx.Done():
			pause.Stop()
			return summarise(lat, time.Since(start)), ctx.Err()
		case <-pause.C:
		}
		path := "/forward/" + strconv.Itoa(i)
		arrived := h.expect(path)
		if _, err := t.post(ctx, web, path); err != nil {
			return summarise(lat, time.Since(start)), err
		}
		acked := time.Now()
		select {
		case at := <-arrived:
			lat = append(lat, max(0, at.Sub(acked)))
		case <-time.After(30 * time.Second):
			return summarise(lat, time.Since(start)), fmt.Errorf("the %s client did not deliver %s within 30 s: %s",
				client, path, strings.TrimSpace(stderr.String()))
		case <-ctx.Done():
			return summarise(lat, time.Since(start)), ctx.Err()
		}
	}
	return summarise(lat, time.Since(start)), nil
}

// download fetches a file the server offers under /downloads/ into a
// temporary file that lives as long as the server's data dir.
func (t *Target) download(ctx context.Context, name string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(t.API, "/api/v1")+"/downloads/"+name, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("download %s: %s", name, resp.Status)
	}
	path := filepath.Join(t.dataDir, name)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// arrivals is the local handler: it notes when each path arrives.
type arrivals struct {
	url string
	srv *http.Server

	mu      sync.Mutex
	waiting map[string]chan time.Time
}

func newArrivals() (*arrivals, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &arrivals{url: "http://" + l.Addr().String(), waiting: map[string]chan time.Time{}}
	a.srv = &http.Server{Handler: a}
	go a.srv.Serve(l)
	return a, nil
}

func (a *arrivals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	io.Copy(io.Discard, r.Body)
	a.mu.Lock()
	c, ok := a.waiting[r.URL.Path]
	delete(a.waiting, r.URL.Path)
	a.mu.Unlock()
	if ok {
		c <- at
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *arrivals) expect(path string) <-chan time.Time {
	c := make(chan time.Time, 1)
	a.mu.Lock()
	a.waiting[path] = c
	a.mu.Unlock()
	return c
}

func (a *arrivals) close() error {
	err := a.srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
