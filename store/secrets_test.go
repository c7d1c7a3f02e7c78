package store

import (
	"bytes"
	"sync"
	"testing"
)

// Processes sharing a database that ask for a secret at once, as replicas
// starting together do, all get the one secret made, and a store opened
// on the database later gets it too.
func TestSecretSharedAndKept(t *testing.T) {
	s := newStore(t)
	stores := []*Store{s, openAgain(t, s), openAgain(t, s)}
	got := make([][]byte, 3*len(stores))
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			key, err := stores[i%len(stores)].Secret(t.Context(), "test")
			if err != nil {
				t.Error(err)
			}
			got[i] = key
		})
	}
	wg.Wait()
	if len(got[0]) != secretSize {
		t.Fatalf("a secret of %d bytes", len(got[0]))
	}
	for i, key := range got {
		if !bytes.Equal(key, got[0]) {
			t.Fatalf("ask %d got another secret: %x, not %x", i, key, got[0])
		}
	}
	for _, st := range stores[1:] {
		st.Close()
	}
	if key, err := openAgain(t, s).Secret(t.Context(), "test"); err != nil || !bytes.Equal(key, got[0]) {
		t.Errorf("opened again: %x %v, want %x", key, err, got[0])
	}
	if other, err := s.Secret(t.Context(), "other"); err != nil || bytes.Equal(other, got[0]) {
		t.Errorf("another name's secret: %x %v, the same as the first", other, err)
	}
}
