package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// corpus writes transactional mail the way search meets it: words drawn
// from a Zipf distribution over a 60,000-word vocabulary, names and
// addresses from pools, and in each message an order number, a URL token
// and a code of its own.
type corpus struct {
	r     *rand.Rand
	zipf  *rand.Zipf
	words []string
	names []string
}

// fork is a corpus with the same vocabulary and a random stream of its
// own, for another goroutine.
func (c *corpus) fork(seed uint64) *corpus {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return &corpus{r: r, zipf: rand.NewZipf(r, 1.07, 2, uint64(len(c.words)-1)), words: c.words, names: c.names}
}

// Planted words: rareWord in one message of rareEvery, commonWord in one of
// commonEvery (1 %). Each query also looks for a part of the word that is
// not a whole token.
const (
	rareWord    = "quokkarine"
	rareEvery   = 100_003
	commonWord  = "zephyrlon"
	commonEvery = 100
)

func newCorpus(seed uint64) *corpus {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	c := &corpus{r: r}
	seen := map[string]bool{}
	for _, w := range strings.Fields("the to and of a your you for is in on this we be are with at order by it from please") {
		seen[w] = true
		c.words = append(c.words, w)
	}
	cons := []string{"b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "st", "tr", "ch", "th"}
	vowels := []string{"a", "e", "i", "o", "u", "ea", "ou", "ie"}
	for len(c.words) < 60_000 {
		var b strings.Builder
		for range 1 + r.IntN(4) {
			b.WriteString(cons[r.IntN(len(cons))])
			b.WriteString(vowels[r.IntN(len(vowels))])
		}
		if r.IntN(3) == 0 {
			b.WriteString(cons[r.IntN(len(cons))])
		}
		if w := b.String(); !seen[w] && !strings.Contains(w, "quokk") && !strings.Contains(w, "phyr") {
			seen[w] = true
			c.words = append(c.words, w)
		}
	}
	c.zipf = rand.NewZipf(r, 1.07, 2, uint64(len(c.words)-1))
	for range 5000 {
		c.names = append(c.names, title(c.words[50+r.IntN(20_000)])+" "+title(c.words[50+r.IntN(20_000)]))
	}
	return c
}

func title(w string) string { return strings.ToUpper(w[:1]) + w[1:] }

func (c *corpus) alnum(n int) string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[c.r.IntN(len(chars))]
	}
	return string(b)
}

// message is the i-th message of the corpus, with about size bytes of text.
func (c *corpus) message(inboxID string, i, size int) *NewMessage {
	var subject strings.Builder
	for j := range 6 {
		if j > 0 {
			subject.WriteByte(' ')
		}
		subject.WriteString(c.words[c.zipf.Uint64()])
	}
	order := strings.ToUpper(c.alnum(10))
	fmt.Fprintf(&subject, " #%s", order)
	from := Address{Name: c.names[c.r.IntN(len(c.names))], Address: "noreply@" + c.words[200+c.r.IntN(500)] + ".example.com"}
	to := Address{Name: c.names[c.r.IntN(len(c.names))], Address: fmt.Sprintf("user%d@example.org", c.r.IntN(20_000))}

	var text strings.Builder
	fmt.Fprintf(&text, "Hello %s,\n\n", strings.Fields(to.Name)[0])
	for text.Len() < size-160 {
		for j := range 6 + c.r.IntN(14) {
			if j > 0 {
				text.WriteByte(' ')
			}
			text.WriteString(c.words[c.zipf.Uint64()])
		}
		text.WriteString(". ")
		if c.r.IntN(5) == 0 {
			text.WriteString("\n")
		}
	}
	if i%rareEvery == rareEvery-1 {
		text.WriteString(rareWord + " ")
	}
	if i%commonEvery == commonEvery-1 {
		text.WriteString(commonWord + " ")
	}
	fmt.Fprintf(&text, "\nYour code: %06d\nOrder %s: https://shop.example.com/orders/%s?utm_source=email\n",
		c.r.IntN(1_000_000), order, c.alnum(16))
	body := text.String()
	raw := fmt.Sprintf("From: %s <%s>\r\nTo: %s <%s>\r\nSubject: %s\r\nMessage-ID: <%d@bench>\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n\r\n%s", from.Name, from.Address, to.Name, to.Address,
		subject.String(), i, strings.ReplaceAll(body, "\n", "\r\n"))
	return &NewMessage{InboxID: inboxID, ReceivedAt: time.Now(), EnvelopeFrom: from.Address,
		EnvelopeTo: []string{to.Address}, From: &from, To: []Address{to}, Subject: subject.String(),
		MessageID: fmt.Sprintf("%d@bench", i), Headers: []Header{{Name: "Subject", Values: []string{subject.String()}}},
		Text: &body, Snippet: body[:200], Raw: []byte(raw)}
}

// insertAll stores n corpus messages with many concurrent callers, as
// SMTP sessions do, so the writer commits them in batches.
func insertAll(ctx context.Context, s *Store, c *corpus, inboxID string, n, size int, progress func(i int)) error {
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for w := range 32 {
		c := c.fork(uint64(w) + 1)
		wg.Go(func() {
			for failed.Load() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				progress(i)
				if _, err := s.InsertMessage(ctx, c.message(inboxID, i, size)); err != nil {
					failed.Store(err)
				}
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return err
	}
	return nil
}

// tableBytes sums the pages of the tables and indexes whose names start
// with one of prefixes.
func tableBytes(tb testing.TB, s *Store, prefixes ...string) int64 {
	tb.Helper()
	rows, err := s.rdb.Query(`SELECT name, sum(pgsize) FROM dbstat GROUP BY name`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var total int64
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			tb.Fatal(err)
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				total += size
				break
			}
		}
	}
	return total
}

var searchTables = []string{"messages_search", "requests_search", "search_terms", "sqlite_autoindex_search_terms"}

// BenchmarkSearch1M measures search at a million stored messages. It needs
// CAPTURE_SEARCH_BENCH_DIR, a directory outside the repository where it
// builds the database once (several minutes) and reuses it afterwards;
// CAPTURE_SEARCH_BENCH_N changes the count.
//
//	CAPTURE_SEARCH_BENCH_DIR=$HOME/.cache/capture-search go test ./store -run '^$' -bench Search1M -benchtime 1x
func BenchmarkSearch1M(b *testing.B) {
	dir := os.Getenv("CAPTURE_SEARCH_BENCH_DIR")
	if dir == "" {
		b.Skip("set CAPTURE_SEARCH_BENCH_DIR to a directory outside the repository to build the database in")
	}
	n := 1_000_000
	if v := os.Getenv("CAPTURE_SEARCH_BENCH_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < commonEvery {
			b.Fatalf("CAPTURE_SEARCH_BENCH_N=%q: want a count of at least %d", v, commonEvery)
		}
	}
	dir = filepath.Join(dir, fmt.Sprint(n))
	ctx := context.Background()
	s, inboxID := searchBenchStore(b, ctx, dir, n)
	defer s.Close()

	var count int64
	s.rdb.QueryRow(`SELECT count(*) FROM messages`).Scan(&count)
	var pageCount, pageSize int64
	s.rdb.QueryRow(`PRAGMA page_count`).Scan(&pageCount)
	s.rdb.QueryRow(`PRAGMA page_size`).Scan(&pageSize)
	total := pageCount * pageSize
	index := tableBytes(b, s, searchTables...)
	b.Logf("%d messages; database %.0f B/message, of which the search index %.0f B/message (+%.1f%% over %.0f)",
		count, float64(total)/float64(count), float64(index)/float64(count),
		100*float64(index)/float64(total-index), float64(total-index)/float64(count))
	b.ReportMetric(float64(total)/float64(count), "B/msg")
	b.ReportMetric(float64(index)/float64(count), "index-B/msg")

	for _, q := range []struct{ name, q string }{
		{"rare-word", rareWord},
		{"rare-substring", rareWord[2:8]},     // okkari
		{"common-word", commonWord},           // 1 % of messages
		{"common-substring", commonWord[2:7]}, // phyrl
		{"rare-and-common", rareWord + " " + commonWord[1:]},
		{"phrase", `"` + commonWord + ` your code"`},
		{"absent", "nowherefound"},
	} {
		b.Run(q.name, func(b *testing.B) {
			var times []time.Duration
			var found int
			for range max(b.N, 25) {
				start := time.Now()
				l, err := s.Messages(ctx, inboxID, MessageFilter{Q: q.q}, Page{Limit: DefaultLimit})
				if err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
				found = len(l.Items)
			}
			slices.Sort(times)
			p50 := times[len(times)/2]
			b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(found), "found")
			b.Logf("q=%q: p50 %v, max %v, %d found", q.q, p50, times[len(times)-1], found)
		})
	}
}

// searchBenchStore opens the benchmark database in dir, building it with n
// corpus messages first when it is not there yet.
func searchBenchStore(b *testing.B, ctx context.Context, dir string, n int) (*Store, string) {
	done := filepath.Join(dir, "complete")
	if _, err := os.Stat(done); err != nil {
		os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		s, err := Open(ctx, filepath.Join(dir, DBFile))
		if err != nil {
			b.Fatal(err)
		}
		p, err := s.CreateProject(ctx, "bench", "team")
		if err != nil {
			b.Fatal(err)
		}
		in, err := s.CreateInbox(ctx, p.ID, "bench")
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := insertAll(ctx, s, newCorpus(1), in.ID, n, 2048, func(i int) {
			if i > 0 && i%100_000 == 0 {
				fmt.Fprintf(os.Stderr, "built %d messages in %v\n", i, time.Since(start).Round(time.Second))
			}
		}); err != nil {
			b.Fatal(err)
		}
		b.Logf("built %d messages in %v", n, time.Since(start).Round(time.Second))
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(done, nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	s, err := Open(ctx, filepath.Join(dir, DBFile))
	if err != nil {
		b.Fatal(err)
	}
	var inboxID string
	if err := s.rdb.QueryRow(`SELECT id FROM inboxes WHERE name = 'bench'`).Scan(&inboxID); err != nil {
		b.Fatal(err)
	}
	return s, inboxID
}

// receipt is a realistic HTML order confirmation (testdata/receipt.html)
// with a text part, filled in per message with its own order number,
// token, name, address and products.
func (c *corpus) receipt(inboxID string, i int, html string) *NewMessage {
	first := strings.Fields(c.names[c.r.IntN(len(c.names))])[0]
	name := first + " " + title(c.words[50+c.r.IntN(20_000)])
	order := fmt.Sprintf("NW%07d", 1_000_000+i)
	products := []string{"Alpine Trail Jacket", "Merino Crew Socks", "Canvas Field Tote", "Ridge Runner Shoes",
		"Fleece Half-Zip", "Waxed Cotton Cap", "Packable Rain Shell", "Thermal Base Layer"}
	sku := func() string { return fmt.Sprintf("NW-%04d", c.r.IntN(500)) }
	p1, p2 := 20+c.r.IntN(180), 8+c.r.IntN(40)
	fill := strings.NewReplacer("{{FIRST}}", first, "{{NAME}}", name, "{{ORDER}}", order, "{{TOKEN}}", c.alnum(32),
		"{{DATE}}", time.Date(2025, time.Month(1+c.r.IntN(12)), 1+c.r.IntN(28), 0, 0, 0, 0, time.UTC).Format("January 2, 2006"),
		"{{SKU1}}", sku(), "{{SKU2}}", sku(), "{{ITEM1}}", products[c.r.IntN(len(products))],
		"{{ITEM2}}", products[c.r.IntN(len(products))], "{{SIZE}}", []string{"S", "M", "L", "XL"}[c.r.IntN(4)],
		"{{COLOUR}}", title(c.words[c.zipf.Uint64()]), "{{PRICE1}}", fmt.Sprintf("%d.00", p1),
		"{{PRICE2}}", fmt.Sprintf("%d.50", p2), "{{SUBTOTAL}}", fmt.Sprintf("%d.00", p1+2*p2+1),
		"{{TAX}}", fmt.Sprintf("%d.%02d", (p1+2*p2)/10, c.r.IntN(100)), "{{TOTAL}}", fmt.Sprintf("%d.%02d", p1+2*p2+(p1+2*p2)/10+8, c.r.IntN(100)),
		"{{CARRIER}}", []string{"UPS", "FedEx", "USPS"}[c.r.IntN(3)], "{{LAST4}}", fmt.Sprintf("%04d", c.r.IntN(10_000)),
		"{{STREET}}", fmt.Sprintf("%d %s Street", 1+c.r.IntN(9999), title(c.words[100+c.r.IntN(5000)])),
		"{{CITY}}", title(c.words[100+c.r.IntN(5000)])+", WA 98"+fmt.Sprintf("%03d", c.r.IntN(1000)))
	body := fill.Replace(html)
	text := fill.Replace("Thanks for your order, {{FIRST}}!\n\nWe've received your order #{{ORDER}} placed on {{DATE}}.\n" +
		"View your order: https://shop.example.com/account/orders/{{ORDER}}?token={{TOKEN}}\n\n" +
		"{{ITEM1}} (size {{SIZE}}, SKU {{SKU1}})  ${{PRICE1}}\n{{ITEM2}} x2 (colour {{COLOUR}}, SKU {{SKU2}})  ${{PRICE2}}\n\n" +
		"Subtotal ${{SUBTOTAL}}\nShipping $6.95\nTax ${{TAX}}\nTotal ${{TOTAL}} USD\n\n" +
		"Shipping to {{NAME}}, {{STREET}}, {{CITY}}\nPaid with Visa ending in {{LAST4}}\n\n" +
		"Northwind Outfitters, Inc. · 410 Terry Ave N · Seattle, WA 98109\n")
	subject := "Your Northwind order #" + order + " is confirmed"
	to := Address{Name: name, Address: fmt.Sprintf("%s.%d@example.org", strings.ToLower(first), i)}
	raw := "From: Northwind Outfitters <orders@shop.example.com>\r\nTo: " + name + " <" + to.Address + ">\r\n" +
		"Subject: " + subject + "\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=\"b1\"\r\n\r\n" +
		"--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + text + "\r\n--b1\r\nContent-Type: text/html; charset=utf-8\r\n\r\n" +
		body + "\r\n--b1--\r\n"
	return &NewMessage{InboxID: inboxID, ReceivedAt: time.Now(), EnvelopeFrom: "bounces@shop.example.com",
		EnvelopeTo: []string{to.Address}, From: &Address{Name: "Northwind Outfitters", Address: "orders@shop.example.com"},
		To: []Address{to}, Subject: subject, Text: &text, HTML: &body, Snippet: text[:120], Raw: []byte(raw)}
}

// BenchmarkSearchIndexSize stores a few thousand messages of two kinds and
// reports what a message takes with its search index, and the index alone
// (after its staged rows moved into FTS5). The corpus of varied text is
// measured by BenchmarkSearch1M instead: with a few thousand messages its
// vocabulary is still mostly new words.
//
//	go test ./store -run '^$' -bench SearchIndexSize -benchtime 1x
func BenchmarkSearchIndexSize(b *testing.B) {
	const n = 5000
	html, err := os.ReadFile("testdata/receipt.html")
	if err != nil {
		b.Fatal(err)
	}
	for _, kind := range []struct {
		name string
		msg  func(c *corpus, inboxID string, i int) *NewMessage
	}{
		{"smtpload-2KiB", func(c *corpus, inboxID string, i int) *NewMessage {
			return smtploadMessage(inboxID, int64(i%8), i/8)
		}},
		{"receipt-html", func(c *corpus, inboxID string, i int) *NewMessage { return c.receipt(inboxID, i, string(html)) }},
	} {
		b.Run(kind.name, func(b *testing.B) {
			s, inboxID := benchInbox(b)
			c := newCorpus(2)
			for i := range n {
				if _, err := s.InsertMessage(b.Context(), kind.msg(c, inboxID, i)); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.indexStaged(b.Context()); err != nil {
				b.Fatal(err)
			}
			all := tableBytes(b, s, "")
			index := tableBytes(b, s, searchTables...)
			b.ReportMetric(float64(all)/n, "B/msg")
			b.ReportMetric(float64(index)/n, "index-B/msg")
			b.ReportMetric(100*float64(index)/float64(all-index), "index-%")
		})
	}
}
