// Package bench measures a real `capture serve` process: it starts one in a
// throwaway data dir on loopback ports, drives it, and reads its peak memory.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Target is a running server under test.
type Target struct {
	API          string // read API base URL
	Key          string
	InboxID      string
	SMTPPassword string
	CaptureURL   string // the default endpoint's capture URL
	EndpointID   string
	CAFile       string
	StartTLSAddr string
	TLSAddr      string

	binary  string
	args    []string
	cmd     *exec.Cmd
	dataDir string
	done    chan error
	exited  bool // stopped, and not started again
	// dbArgs name a shared database (--database URL), or are empty.
	dbArgs []string
}

var (
	bannerRow = regexp.MustCompile(`^\s+(Read API|API key|Inbox|SMTP password|Capture URL|CA certificate|SMTP)\s+(.*)$`)
	smtpPorts = regexp.MustCompile(`STARTTLS: (\d+).*TLS: (\d+)`)
)

// Start runs `binary serve` in a new data dir with every listener on a free
// loopback port, and waits for its banner. extraArgs with --database URL
// run it on that database instead, which must be empty.
func Start(ctx context.Context, binary string, extraArgs ...string) (*Target, error) {
	t, err := launch(ctx, binary, extraArgs)
	if err != nil {
		return nil, err
	}
	if t.Key == "" || t.StartTLSAddr == "" {
		t.Stop()
		return nil, errors.New("serve's banner lacked the key or SMTP ports: was the data dir (or database) new?")
	}
	if len(t.dbArgs) > 0 {
		// The CA is in the database: the SMTP load validates against a
		// copy of it in the data dir.
		pem, err := exec.CommandContext(ctx, binary, append([]string{"ca"}, t.dbArgs...)...).Output()
		if err == nil {
			t.CAFile = filepath.Join(t.dataDir, "ca.pem")
			err = os.WriteFile(t.CAFile, pem, 0o600)
		}
		if err != nil {
			t.Stop()
			return nil, fmt.Errorf("read the CA from the database: %w", err)
		}
	}
	// Benchmarks make many API calls; the free plan's rate limit would
	// measure the limiter instead of the server.
	set := exec.CommandContext(ctx, binary, append([]string{"project", "set-plan", "default", "team", "--data-dir", t.dataDir}, t.dbArgs...)...)
	if out, err := set.CombinedOutput(); err != nil {
		t.Stop()
		return nil, fmt.Errorf("set plan: %v: %s", err, out)
	}
	return t, nil
}

// Replica starts another server on t's database (which must be a shared
// one); its banner shows no key, so it takes t's.
func (t *Target) Replica(ctx context.Context) (*Target, error) {
	if len(t.dbArgs) == 0 {
		return nil, errors.New("replicas need a shared database (--database)")
	}
	r, err := launch(ctx, t.binary, t.dbArgs)
	if err != nil {
		return nil, err
	}
	r.Key, r.SMTPPassword, r.CAFile = t.Key, t.SMTPPassword, t.CAFile
	return r, nil
}

func launch(ctx context.Context, binary string, extraArgs []string) (*Target, error) {
	dir, err := os.MkdirTemp("", "capture-bench-")
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--data-dir", dir, "--log-level", "warn", "--http", "127.0.0.1:0",
		"--capture", "127.0.0.1:0", "--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0",
		"--email-api", "127.0.0.1:0"}, extraArgs...)
	t := &Target{binary: binary, args: args, dataDir: dir}
	if i := slices.Index(extraArgs, "--database"); i >= 0 && i+1 < len(extraArgs) {
		t.dbArgs = extraArgs[i : i+2]
	}
	if err := t.start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return t, nil
}

// Restart stops the server and starts it again on the same data dir, so
// that what a load measures starts from a fresh process.
func (t *Target) Restart(ctx context.Context) error {
	if err := t.stop(); err != nil {
		return err
	}
	return t.start(ctx)
}

// start runs the server and reads its banner into t; a later start's
// banner has no key or password, and t keeps the first ones.
func (t *Target) start(ctx context.Context) error {
	cmd := exec.Command(t.binary, t.args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s serve: %w", t.binary, err)
	}
	t.cmd, t.done, t.CAFile, t.exited = cmd, make(chan error, 1), "", false
	rows := make(chan [2]string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := bannerRow.FindStringSubmatch(sc.Text()); m != nil {
				rows <- [2]string{m[1], m[2]}
			}
		}
		close(rows)
		io.Copy(io.Discard, stdout)
	}()
	go func() { t.done <- cmd.Wait() }()

	timeout := time.After(30 * time.Second)
	for t.CAFile == "" {
		select {
		case row, ok := <-rows:
			if !ok {
				t.stop()
				return fmt.Errorf("serve exited before it was ready: %s", strings.TrimSpace(stderr.String()))
			}
			whole := row[1]
			first := strings.Fields(whole)[0]
			switch row[0] {
			case "Read API":
				t.API = first
			case "API key":
				t.Key = first
			case "Inbox":
				t.InboxID = first
			case "SMTP password":
				t.SMTPPassword = first
			case "Capture URL":
				t.CaptureURL = first
				t.EndpointID = first[strings.LastIndex(first, "/")+1:]
			case "CA certificate":
				t.CAFile = first
			case "SMTP":
				if m := smtpPorts.FindStringSubmatch(whole); m != nil {
					t.StartTLSAddr, t.TLSAddr = "127.0.0.1:"+m[1], "127.0.0.1:"+m[2]
				}
			}
		case <-timeout:
			t.stop()
			return errors.New("serve did not print its banner within 30 s")
		case <-ctx.Done():
			t.stop()
			return ctx.Err()
		}
	}
	return nil
}

// PID is the server's process id.
func (t *Target) PID() int { return t.cmd.Process.Pid }

// PeakRSS reads the server's peak resident memory (VmHWM) in bytes.
func (t *Target) PeakRSS() (int64, error) {
	n, err := t.status("VmHWM")
	if err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	return n, nil
}

// CPUTime reads the user plus system CPU time the server has used so far,
// in clock ticks of 10 ms (USER_HZ is 100 on Linux).
func (t *Target) CPUTime() (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(t.PID()), "stat"))
	if err != nil {
		return 0, fmt.Errorf("server CPU time: %w", err)
	}
	// The command name may hold spaces and parentheses; the fields after
	// its closing parenthesis start with the state (field 3).
	rest := string(b[bytes.LastIndexByte(b, ')')+1:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, errors.New("server CPU time: short /proc stat line")
	}
	var ticks int64
	for _, v := range f[11:13] { // utime and stime: fields 14 and 15
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("server CPU time: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// Stop ends the server gracefully and removes its data dir.
func (t *Target) Stop() error {
	defer os.RemoveAll(t.dataDir)
	return t.stop()
}

func (t *Target) stop() error {
	if t.exited {
		return nil
	}
	t.exited = true
	t.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-t.done:
		return err
	case <-time.After(15 * time.Second):
		t.cmd.Process.Kill()
		<-t.done
		return errors.New("serve did not stop within 15 s of SIGTERM")
	}
}

// Latency summarises timed operations.
type Latency struct {
	N             int
	Elapsed       time.Duration
	P50, P99, Max time.Duration
}

func summarise(d []time.Duration, elapsed time.Duration) Latency {
	if len(d) == 0 {
		return Latency{Elapsed: elapsed}
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return Latency{N: len(d), Elapsed: elapsed, P50: at(0.50), P99: at(0.99), Max: d[len(d)-1]}
}

// PerSecond is operations per second.
func (l Latency) PerSecond() float64 {
	if l.Elapsed <= 0 {
		return 0
	}
	return float64(l.N) / l.Elapsed.Seconds()
}

func (t *Target) get(ctx context.Context, client *http.Client, path string, v any) error {
	return t.getWithKey(ctx, client, t.Key, path, v)
}

func (t *Target) getWithKey(ctx context.Context, client *http.Client, key, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", t.API+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	if v != nil {
		return json.Unmarshal(body, v)
	}
	return nil
}

func (t *Target) post(ctx context.Context, client *http.Client, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", t.CaptureURL+path, strings.NewReader(`{"event":"bench"}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		return "", fmt.Errorf("capture: %d %v", resp.StatusCode, err)
	}
	return out.ID, nil
}

// WaitLatency measures, n times, how long after a capture is acknowledged
// to its sender a list call already waiting for it returns it.
func (t *Target) WaitLatency(ctx context.Context, n int) (Latency, error) {
	client := &http.Client{Timeout: 40 * time.Second}
	last, err := t.post(ctx, client, "/warmup")
	if err != nil {
		return Latency{}, err
	}
	var lat []time.Duration
	start := time.Now()
	for range n {
		type got struct {
			at  time.Time
			err error
		}
		returned := make(chan got, 1)
		go func() {
			var l struct{ Items []struct{ ID string } }
			err := t.get(ctx, client, "/endpoints/"+t.EndpointID+"/requests?wait=20&after="+last, &l)
			if err == nil && len(l.Items) == 0 {
				err = errors.New("wait returned no capture")
			}
			returned <- got{time.Now(), err}
		}()
		// Give the list call time to reach the server and start holding;
		// a capture before that would be found without waiting.
		time.Sleep(20 * time.Millisecond)
		id, err := t.post(ctx, client, "/wait")
		acked := time.Now()
		if err != nil {
			return Latency{}, err
		}
		r := <-returned
		if r.err != nil {
			return Latency{}, r.err
		}
		lat = append(lat, max(0, r.at.Sub(acked)))
		last = id
	}
	return summarise(lat, time.Since(start)), nil
}

// keys creates n more API keys in the default project.
func (t *Target) keys(ctx context.Context, n int) ([]string, error) {
	var out []string
	for range n {
		cmd := exec.CommandContext(ctx, t.binary, "key", "create", "--json", "--data-dir", t.dataDir)
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("create key: %w", err)
		}
		var k struct{ Key string }
		if err := json.Unmarshal(b, &k); err != nil {
			return nil, fmt.Errorf("create key: %w", err)
		}
		out = append(out, k.Key)
	}
	return out, nil
}

// ListLatency measures n list calls of the newest page of an endpoint
// holding captures, from conns concurrent clients. Each client has a key of
// its own, so the per-key rate limit is not what gets measured.
func (t *Target) ListLatency(ctx context.Context, n, conns, captures int) (Latency, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	keys, err := t.keys(ctx, conns)
	if err != nil {
		return Latency{}, err
	}
	for i := range captures {
		if _, err := t.post(ctx, client, "/list/"+strconv.Itoa(i)); err != nil {
			return Latency{}, err
		}
	}
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	var wg sync.WaitGroup
	start := time.Now()
	for _, key := range keys {
		wg.Go(func() {
			for range next {
				s := time.Now()
				err := t.getWithKey(ctx, client, key, "/endpoints/"+t.EndpointID+"/requests?limit=20", nil)
				d := time.Since(s)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return summarise(lat, time.Since(start)), firstErr
}
