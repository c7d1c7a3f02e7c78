package started

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// onCPU is how long this process's main thread has run, and waited in a
// run queue, since it was created (/proc/self/schedstat, nanoseconds).
func onCPU() time.Duration {
	b, err := os.ReadFile("/proc/self/schedstat")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	running, err1 := strconv.ParseInt(string(f[0]), 10, 64)
	waiting, err2 := strconv.ParseInt(string(f[1]), 10, 64)
	if err1 != nil || err2 != nil || running < 0 || waiting < 0 {
		return 0
	}
	return time.Duration(running + waiting)
}

// createdTick is the start of the 10 ms tick in which the kernel created
// this process (/proc/self/stat, field 22, in ticks after boot).
func createdTick() (time.Time, bool) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return time.Time{}, false
	}
	// The command name, in parentheses, may hold spaces; the fields after
	// it start at field 3, so starttime is the 20th of them.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return time.Time{}, false
	}
	fields := bytes.Fields(stat[end+1:])
	if len(fields) < 20 {
		return time.Time{}, false
	}
	ticks, err := strconv.ParseInt(string(fields[19]), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	var boot unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot); err != nil {
		return time.Time{}, false
	}
	now := time.Now()
	// /proc counts in ticks of USER_HZ, 100 a second on every
	// architecture.
	age := time.Duration(boot.Nano()) - time.Duration(ticks)*tick
	if age < 0 {
		return time.Time{}, false
	}
	return now.Add(-age), true
}
