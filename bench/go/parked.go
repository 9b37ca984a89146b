//go:build ignore

// parked.go - the Go peer of aco_rt_bench's parked-memory figure
// (bench/bench_rt.sh builds and runs it).
//
//	parked [-mode sleep|chan] [N]     (N defaults to 1000000)
//
// With GOMAXPROCS=1 and the default GOGC it starts N goroutines that each
// block for good: in time.Sleep(time.Hour) (-mode sleep, the default) or in
// a receive on one shared unbuffered channel nobody sends on (-mode chan).
// It reads its own VmRSS from /proc/self/status after a runtime.GC() (the
// "before" figure), starts them, waits until every one has reached its
// blocking call and the scheduler has had time to park them all, reads
// VmRSS again and prints
//
//	parked_bytes_per_co <(rss_after - rss_before) / N>
//
// then exits without cleaning up.  The details go to stderr.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

var (
	started int64    // goroutines that reached their blocking call
	never   chan int // -mode chan: nobody ever sends on it
)

func sleeper() {
	atomic.AddInt64(&started, 1)
	time.Sleep(time.Hour)
}

func receiver() {
	atomic.AddInt64(&started, 1)
	<-never
}

// vmRSS returns this process's VmRSS in bytes.
func vmRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		fmt.Fprintln(os.Stderr, "parked:", err)
		os.Exit(1)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				break
			}
			return kb * 1024
		}
	}
	fmt.Fprintln(os.Stderr, "parked: no VmRSS line in /proc/self/status")
	os.Exit(1)
	return 0
}

func main() {
	mode := flag.String("mode", "sleep", "what the goroutines block in: sleep or chan")
	flag.Parse()
	n := 1000000
	if flag.NArg() > 1 {
		fmt.Fprintln(os.Stderr, "usage: parked [-mode sleep|chan] [N]")
		os.Exit(2)
	}
	if flag.NArg() == 1 {
		v, err := strconv.Atoi(flag.Arg(0))
		if err != nil || v < 1 {
			fmt.Fprintln(os.Stderr, "parked: N must be a positive integer")
			os.Exit(2)
		}
		n = v
	}
	var body func()
	switch *mode {
	case "sleep":
		body = sleeper
	case "chan":
		never = make(chan int)
		body = receiver
	default:
		fmt.Fprintln(os.Stderr, "parked: -mode must be sleep or chan")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(1)

	runtime.GC()
	before := vmRSS()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		go body()
	}
	// One P: the new goroutines run when the main one yields.
	for atomic.LoadInt64(&started) < int64(n) {
		runtime.Gosched()
	}
	// Each one went from the increment straight into its blocking call;
	// let the last ones get there and park.
	time.Sleep(200 * time.Millisecond)
	after := vmRSS()
	fmt.Fprintf(os.Stderr, "parked: mode %s, %d goroutines (%d live), started in %v, "+
		"VmRSS %d KiB before, %d KiB after\n", *mode, n, runtime.NumGoroutine(),
		time.Since(t0).Round(time.Millisecond), before/1024, after/1024)
	fmt.Printf("parked_bytes_per_co %d\n", (after-before)/int64(n))
}
