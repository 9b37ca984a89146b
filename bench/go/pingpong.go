//go:build ignore

// pingpong.go - the Go peer of aco_rt_bench's channel ping-pong
// (bench/bench_rt.sh builds and runs it).
//
// Two goroutines on one P (GOMAXPROCS=1; -procs P for more) bounce an int
// over two unbuffered channels: A (the main goroutine) sends on ch1 and receives on ch2, B
// receives on ch1 and sends on ch2.  Nothing else is in either loop.  One
// round trip is one send each way, so two goroutine switches.
//
//	pingpong [-n round trips per segment] [-segments S] [-warmup W] [-procs P] [-same]
//
// -same: both goroutines run one function (loop below), so that each
// one's send and receive are the very calls of the other's (B receives
// once first, then joins the loop): the shape of aco_rt_bench
// pingpong_same, which prints chan_pingpong_same_ns (so does this).
//
// With -procs 2 Go's scheduler decides where the two goroutines run (a
// woken goroutine usually goes to the waker's P, so they may well share
// one): that is Go at its default with two cores.
//
// prints `chan_pingpong_ns <median ns per round trip over the S segments>`,
// each segment's figure going to stderr.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"time"
)

func main() {
	n := flag.Int("n", 1000000, "round trips per timed segment")
	segments := flag.Int("segments", 7, "timed segments (the median is printed)")
	warmup := flag.Int("warmup", 200000, "untimed round trips first")
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	same := flag.Bool("same", false, "both goroutines in one function")
	flag.Parse()
	if *n < 1 || *segments < 1 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "pingpong: -n and -segments must be >= 1, -warmup >= 0")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(*procs)

	ch1 := make(chan int)
	ch2 := make(chan int)
	total := *warmup + *n**segments

	if *same {
		go func() { // B
			<-ch1
			loop(ch2, ch1, total)
		}()
		loop(ch1, ch2, *warmup)
	} else {
		go func() { // B
			for i := 0; i < total; i++ {
				v := <-ch1
				ch2 <- v
			}
		}()

		// A: the main goroutine.
		for i := 0; i < *warmup; i++ {
			ch1 <- i
			<-ch2
		}
	}
	per := make([]float64, *segments)
	for s := range per {
		t0 := time.Now()
		if *same {
			loop(ch1, ch2, *n)
		} else {
			for i := 0; i < *n; i++ {
				ch1 <- i
				<-ch2
			}
		}
		per[s] = float64(time.Since(t0).Nanoseconds()) / float64(*n)
		fmt.Fprintf(os.Stderr, "pingpong: segment %d: %.2f ns\n", s, per[s])
	}
	sort.Float64s(per)
	name := "chan_pingpong_ns"
	if *same {
		name = "chan_pingpong_same_ns"
	}
	fmt.Printf("%s %.2f\n", name, per[len(per)/2])
}

// loop sends on tx and receives on rx n times (-same: both goroutines).
//
//go:noinline
func loop(tx, rx chan int, n int) {
	v := 0
	for i := 0; i < n; i++ {
		tx <- v
		v = <-rx + 1
	}
}
