package cmd

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// processStart is when the kernel created this process. A script that
// starts `capture wait … &` and then sends its webhook at once can have the
// webhook stored before this program gets to read the clock; the process
// was created before the sender was, so counting from then never misses it.
// The kernel keeps the time in clock ticks after boot, so this is up to a
// tick (10 ms) early, never late.
func processStart() (time.Time, bool) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return time.Time{}, false
	}
	// The command name, in parentheses, may hold spaces; fields count on
	// from the state after it (field 3), and starttime is field 22.
	end := bytes.LastIndexByte(stat, ')')
	fields := bytes.Fields(stat[end+1:])
	if end < 0 || len(fields) < 20 {
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
	// /proc reports ticks of USER_HZ, 100 a second on every architecture.
	age := time.Duration(boot.Nano()) - time.Duration(ticks)*(time.Second/100)
	if age < 0 || age > time.Minute {
		return time.Time{}, false
	}
	return now.Add(-age), true
}
