package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ReadBack is how fast, and how exactly, stored messages read back.
type ReadBack struct {
	Probes                  int
	Raw, Detail, Attachment Latency
}

func (r ReadBack) String() string {
	return fmt.Sprintf("read back %d messages byte for byte: raw p50 %.2f ms p99 %.2f ms · detail p50 %.2f ms p99 %.2f ms · attachment p50 %.2f ms p99 %.2f ms",
		r.Probes, r.Raw.P50.Seconds()*1e3, r.Raw.P99.Seconds()*1e3, r.Detail.P50.Seconds()*1e3, r.Detail.P99.Seconds()*1e3,
		r.Attachment.P50.Seconds()*1e3, r.Attachment.P99.Seconds()*1e3)
}

// probeSizes are the attachment sizes probes cycle through: within one
// compressed chunk of the store, and across several.
var probeSizes = []int{1 << 10, 24 << 10, 300 << 10}

// ReadBack sends n probe messages, each with text and HTML bodies and an
// attachment of random bytes, then reads every one back through the API
// (GET …/raw, the detail, the attachment) and fails unless the raw
// message and the attachment are exactly the bytes sent.
func (t *Target) ReadBack(ctx context.Context, n int) (ReadBack, error) {
	res := ReadBack{Probes: n}
	type probe struct {
		id, raw string
		att     []byte
	}
	rnd := rand.New(rand.NewPCG(uint64(n), 17))
	probes := make([]probe, n)
	for i := range probes {
		att := make([]byte, probeSizes[i%len(probeSizes)])
		for j := range att {
			att[j] = byte(rnd.Uint32())
		}
		raw := probeMessage(i, att)
		if err := t.SendMail("probe@app.test", "user@app.test", []byte(raw)); err != nil {
			return res, fmt.Errorf("probe %d: %w", i, err)
		}
		var l struct {
			Items []struct{ ID, Subject string }
		}
		if err := t.get(ctx, http.DefaultClient, "/inboxes/"+t.InboxID+"/messages?limit=1", &l); err != nil {
			return res, err
		}
		if len(l.Items) != 1 || l.Items[0].Subject != probeSubject(i) {
			return res, fmt.Errorf("probe %d is not the newest message", i)
		}
		probes[i] = probe{id: l.Items[0].ID, raw: raw, att: att}
	}

	client := &http.Client{Timeout: 30 * time.Second}
	var raw, detail, attachment []time.Duration
	start := time.Now()
	for i, p := range probes {
		s := time.Now()
		got, err := t.fetch(ctx, client, "/messages/"+p.id+"/raw")
		raw = append(raw, time.Since(s))
		if err != nil {
			return res, err
		}
		if string(got) != p.raw {
			return res, fmt.Errorf("probe %d: /raw gave %d bytes that differ from the %d sent", i, len(got), len(p.raw))
		}
		var m struct{ Attachments []struct{ ID string } }
		s = time.Now()
		err = t.get(ctx, client, "/messages/"+p.id, &m)
		detail = append(detail, time.Since(s))
		if err != nil {
			return res, err
		}
		if len(m.Attachments) != 1 {
			return res, fmt.Errorf("probe %d: %d attachments, want 1", i, len(m.Attachments))
		}
		s = time.Now()
		got, err = t.fetch(ctx, client, "/messages/"+p.id+"/attachments/"+m.Attachments[0].ID)
		attachment = append(attachment, time.Since(s))
		if err != nil {
			return res, err
		}
		if !bytes.Equal(got, p.att) {
			return res, fmt.Errorf("probe %d: the attachment gave %d bytes that differ from the %d sent", i, len(got), len(p.att))
		}
	}
	elapsed := time.Since(start)
	res.Raw, res.Detail, res.Attachment = summarise(raw, elapsed), summarise(detail, elapsed), summarise(attachment, elapsed)
	return res, nil
}

func probeSubject(i int) string { return "probe " + strconv.Itoa(i) }

// probeMessage is a multipart message with text and HTML bodies and att
// as a base64 attachment, in lines SMTP carries unchanged.
func probeMessage(i int, att []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "From: Probe <probe@app.test>\r\nTo: user@app.test\r\nSubject: %s\r\nMessage-ID: <probe-%d@app.test>\r\n"+
		"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n", probeSubject(i), i)
	b.WriteString("--b1\r\nContent-Type: multipart/alternative; boundary=\"b2\"\r\n\r\n")
	fmt.Fprintf(&b, "--b2\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nYour receipt %d: https://app.test/r/%d\r\n", i, i)
	fmt.Fprintf(&b, "--b2\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Your receipt <a href=\"https://app.test/r/%d\">%d</a></p>\r\n--b2--\r\n", i, i)
	fmt.Fprintf(&b, "--b1\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"r%d.bin\"\r\n"+
		"Content-Transfer-Encoding: base64\r\n\r\n", i)
	enc := base64.StdEncoding.EncodeToString(att)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--b1--\r\n")
	return b.String()
}

// fetch GETs path of the read API and returns the body of a 200.
func (t *Target) fetch(ctx context.Context, client *http.Client, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", t.API+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+t.Key)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return body, err
}

// StopAndSize stops the server gracefully and returns what its data dir
// takes on disk then, as `du -s --block-size=1` counts it.
func (t *Target) StopAndSize() (int64, error) {
	if err := t.stop(); err != nil {
		return 0, err
	}
	var total int64
	err := filepath.WalkDir(t.dataDir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return errors.New("no block count for " + d.Name())
		}
		total += st.Blocks * 512
		return nil
	})
	return total, err
}
