package store

import (
	"encoding/json"
	"fmt"
	"testing"
)

// A row stored before lists kept the first ListedAddresses reads as one
// stored since: the first ones and how many there were. The migrations
// that compute filters and the search index from the column still read
// every address of such a row.
func TestRecipientsStoredWholeReadListed(t *testing.T) {
	all := make([]storedAddress, 5000)
	for i := range all {
		all[i] = storedAddress{Name: fmt.Sprintf(`N "%d" \ {[`, i), Address: fmt.Sprintf("user%05d@many.test", i)}
	}
	old, _ := json.Marshal(storedRecipients{Envelope: []string{"a@b.test"}, To: all, Cc: all[:3], ReplyTo: all[:200]})
	m := &NewMessage{EnvelopeTo: []string{"a@b.test"}, To: addressesOf(all), Cc: addressesOf(all[:3]), ReplyTo: addressesOf(all[:200])}
	now, _ := json.Marshal(recipientsOf(m))
	for name, data := range map[string][]byte{"stored whole": old, "stored listed": now} {
		r, err := decodeRecipients("msg", string(data))
		if err != nil {
			t.Fatal(err)
		}
		to, toCount := listed(r.To, r.ToCount)
		cc, ccCount := listed(r.Cc, r.CcCount)
		replyTo, replyToCount := listed(r.ReplyTo, r.ReplyToCount)
		if len(to) != ListedAddresses || toCount != 5000 || to[99] != Address(all[99]) ||
			len(cc) != 3 || ccCount != 3 || len(replyTo) != ListedAddresses || replyToCount != 200 ||
			len(r.Envelope) != 1 {
			t.Errorf("%s: to %d of %d, cc %d of %d, reply-to %d of %d", name, len(to), toCount, len(cc), ccCount, len(replyTo), replyToCount)
		}
	}
	if len(now) > len(old)/10 {
		t.Errorf("stored listed: %d bytes", len(now))
	}
	_, filterTo, _, err := storedMessageFilters("", "", nil, nil, old)
	if err != nil || len(filterTo) < 5000*len("user00000@many.test") {
		t.Errorf("the filter of a row stored whole: %d bytes, %v", len(filterTo), err)
	}
}
