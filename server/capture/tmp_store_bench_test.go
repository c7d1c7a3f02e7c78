package capture

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capturedev/capture/store"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestTmpStoreCost(t *testing.T) {
	body := []byte(strings.Repeat("x", 1024))
	for _, body := range [][]byte{body, []byte(`{"a":1}`)} {
		for _, conc := range []int{1, 8, 64, 256, 1024} {
			st, _ := store.Open(t.Context(), filepath.Join(t.TempDir(), fmt.Sprint("c", conc, len(body), ".db")))
			p, _ := st.CreateProject(t.Context(), "b", "team")
			ep, _ := st.CreateEndpoint(t.Context(), p.ID, "b", nil)
			const total = 40000
			var wg sync.WaitGroup
			c0, w0 := cpuNow(), time.Now()
			for g := 0; g < conc; g++ {
				wg.Go(func() {
					for i := 0; i < total/conc; i++ {
						_, err := st.InsertRequest(t.Context(), &store.NewRequest{EndpointID: ep.ID, ReceivedAt: time.Now(), Method: "POST", Path: "/hook",
							ContentType: "application/json", RemoteAddr: "127.0.0.1:5000",
							Headers: []store.Header{{Name: "Content-Type", Values: []string{"application/json"}}, {Name: "Host", Values: []string{"127.0.0.1:1"}}}, Body: body})
						if err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			n := total / conc * conc
			cpu, wall := cpuNow()-c0, time.Since(w0)
			t.Logf("body %4d conc %4d: %6.0f inserts/s, cpu %5.1fµs/insert", len(body), conc, float64(n)/wall.Seconds(), float64(cpu.Microseconds())/float64(n))
			st.Close()
		}
	}
}
