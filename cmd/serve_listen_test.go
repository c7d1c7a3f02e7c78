package cmd

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// servedLines starts serve with cmd and returns its banner, up to the CA
// path, and a function that stops it and returns what it logged.
func servedLines(t *testing.T, cmd *exec.Cmd) (banner string, stop func() string) {
	t.Helper()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() string {
		if !stopped {
			stopped = true
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
		return stderr.String()
	}
	t.Cleanup(func() { stop() })
	var b strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "CA certificate") {
			break
		}
	}
	go io.Copy(io.Discard, stdout)
	return b.String(), stop
}

// refusedStart runs a serve that should fail to start, and returns its exit
// code and all it printed. One that starts after all is stopped once its
// banner shows, and reported with exit code 0.
func refusedStart(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	defer r.Close()
	var out strings.Builder
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "Read API") {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			return 0, out.String()
		}
	}
	code := 0
	if ee, ok := cmd.Wait().(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return code, out.String()
}

// bannerRow is the value of one row of serve's banner.
func bannerRow(banner, name string) string {
	for line := range strings.Lines(banner) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// Without root, only the submission ports fall back: 587 is skipped, 465
// replaced by 2465, and 2465 is not bound twice when it is listed already
// or named unexplained when it is taken. Any other port below 1024 stops
// serve with the address and the cause, and writes nothing (SPEC §3).
func TestOnlySubmissionPortsFallBackWithoutRoot(t *testing.T) {
	dir, run := asNobody(t)
	base := []string{"--http", "127.0.0.1:0", "--capture", "127.0.0.1:0", "--email-api", "127.0.0.1:0"}
	serve := func(data string, flags ...string) *exec.Cmd {
		return run(append(append([]string{"serve", "--data-dir", filepath.Join(dir, data)}, base...), flags...)...)
	}
	for _, flags := range [][]string{
		{"--smtp-tls", "127.0.0.1:25", "--smtp-starttls", "127.0.0.1:0"},
		{"--smtp-starttls", "127.0.0.1:25,127.0.0.1:0", "--smtp-tls", "127.0.0.1:0"},
	} {
		code, out := refusedStart(t, serve("refused", flags...))
		if code != 1 || !strings.Contains(string(out), "127.0.0.1:25: bind: permission denied") ||
			strings.Contains(string(out), "needs root") {
			t.Errorf("%v without root: exit %d %s", flags, code, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "refused")); !os.IsNotExist(err) {
			t.Errorf("%v: a refused start created the data dir: %v", flags, err)
		}
	}

	// A loopback address of their own keeps 2465 clear of anything else
	// on this machine.
	banner, stop := servedLines(t, serve("listed", "--smtp-starttls", "127.38.1.7:0",
		"--smtp-tls", "127.38.1.7:465,127.38.1.7:2465"))
	logs := stop()
	if smtp := bannerRow(banner, "SMTP"); !strings.HasSuffix(smtp, "TLS: 2465") {
		t.Errorf("465 and 2465 without root: SMTP %q\n%s", smtp, logs)
	}
	if !strings.Contains(logs, "--smtp-tls 127.38.1.7:465 needs root; skipped (127.38.1.7:2465 is served already)") ||
		strings.Count(logs, "level=WARN") != 1 {
		t.Errorf("465 and 2465 without root: %s", logs)
	}

	taken, err := net.Listen("tcp", "127.38.1.8:2465")
	if err != nil {
		t.Skipf("127.38.1.8:2465 is in use here: %v", err)
	}
	defer taken.Close()
	code, out := refusedStart(t, serve("taken", "--smtp-starttls", "127.38.1.8:0", "--smtp-tls", "127.38.1.8:465"))
	if code != 1 ||
		!strings.Contains(string(out), "--smtp-tls 127.38.1.8:2465, used in place of 127.38.1.8:465 (which needs root): bind: address already in use") {
		t.Errorf("2465 taken: exit %d %s", code, out)
	}
}

// globalIPs are this machine's addresses that are neither loopback nor
// link-local: ones SMTP can be bound to that localhost does not reach.
func globalIPs(t *testing.T) (v4, v6 net.IP) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || !n.IP.IsGlobalUnicast() {
			continue
		}
		if n.IP.To4() != nil && v4 == nil {
			v4 = n.IP
		} else if n.IP.To4() == nil && v6 == nil {
			v6 = n.IP
		}
	}
	return v4, v6
}

// verifiesAt reports whether SMTP over implicit TLS at addr presents a
// certificate the data dir's CA vouches for, for addr's IP.
func verifiesAt(t *testing.T, caPath, addr string) error {
	pem, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
	if err == nil {
		conn.Close()
	}
	return err
}

// SMTP bound to one address that localhost does not reach is announced at
// that address, in the banner and by the administration commands, with a
// certificate for it; bound to several, it keeps the default and says to
// pass --smtp-host; a --smtp-host given is always the one announced (SPEC
// §2, §2a).
func TestSMTPHostIsWhereSMTPListens(t *testing.T) {
	v4, v6 := globalIPs(t)
	if v4 == nil && v6 == nil {
		t.Skip("no address here but loopback and link-local")
	}
	ip := v4
	if ip == nil {
		ip = v6
	}
	dir := filepath.Join(t.TempDir(), "data")
	onIP := net.JoinHostPort(ip.String(), "0")
	serve := func(flags ...string) *exec.Cmd {
		return exec.Command(binary, append([]string{"serve", "--data-dir", dir, "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
			"--email-api", "127.0.0.1:0"}, flags...)...)
	}
	banner, stop := servedLines(t, serve("--smtp-starttls", onIP, "--smtp-tls", onIP))
	smtp, caPath := bannerRow(banner, "SMTP"), bannerRow(banner, "CA certificate")
	if !strings.HasPrefix(smtp, ip.String()+" ") {
		t.Errorf("SMTP bound to %s only: banner SMTP %q", ip, smtp)
	}
	r := capture(t, "inbox", "list", "--data-dir", dir)
	if !strings.Contains(r.stdout, "SMTP: "+ip.String()+" ") {
		t.Errorf("inbox list, SMTP bound to %s only: %+v", ip, r)
	}
	tlsPort := smtp[strings.LastIndex(smtp, " ")+1:]
	if err := verifiesAt(t, caPath, net.JoinHostPort(ip.String(), tlsPort)); err != nil {
		t.Errorf("the SMTP certificate at %s: %v", ip, err)
	}
	if logs := stop(); strings.Contains(logs, "level=WARN") {
		t.Errorf("SMTP bound to %s only: %s", ip, logs)
	}

	banner, stop = servedLines(t, serve("--smtp-starttls", onIP, "--smtp-tls", onIP, "--smtp-host", "localhost"))
	if smtp := bannerRow(banner, "SMTP"); !strings.HasPrefix(smtp, "localhost ") {
		t.Errorf("--smtp-host localhost given: banner SMTP %q", smtp)
	}
	stop()

	if v4 == nil || v6 == nil {
		t.Skip("SMTP on two addresses needs an IPv4 and an IPv6 one")
	}
	banner, stop = servedLines(t, serve("--smtp-starttls", net.JoinHostPort(v4.String(), "0"),
		"--smtp-tls", net.JoinHostPort(v6.String(), "0")))
	smtp = bannerRow(banner, "SMTP")
	tlsPort = smtp[strings.LastIndex(smtp, " ")+1:]
	if err := verifiesAt(t, caPath, net.JoinHostPort(v6.String(), tlsPort)); err != nil {
		t.Errorf("the SMTP certificate at %s: %v", v6, err)
	}
	logs := stop()
	if !strings.HasPrefix(smtp, "localhost ") || !strings.Contains(logs, "pass --smtp-host") ||
		!strings.Contains(logs, v4.String()) || !strings.Contains(logs, v6.String()) {
		t.Errorf("SMTP on %s and %s: banner SMTP %q, logs %s", v4, v6, smtp, logs)
	}
}

// A relative data dir is printed as an absolute one: the paths in the
// banner work from any directory.
func TestRelativeDataDirIsPrintedAbsolute(t *testing.T) {
	work := t.TempDir()
	cmd := exec.Command(binary, "serve", "--data-dir", "rel", "--http", "127.0.0.1:0", "--capture", "127.0.0.1:0",
		"--smtp-starttls", "127.0.0.1:0", "--smtp-tls", "127.0.0.1:0", "--email-api", "127.0.0.1:0")
	cmd.Dir = work
	banner, stop := servedLines(t, cmd)
	stop()
	want := filepath.Join(work, "rel")
	if ca := bannerRow(banner, "CA certificate"); ca != filepath.Join(want, "tls", "ca.pem") ||
		!strings.Contains(bannerRow(banner, "API key"), "saved in "+filepath.Join(want, "credentials.json")) {
		t.Errorf("--data-dir rel in %s: %s", work, banner)
	}
}
