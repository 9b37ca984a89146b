//go:build ignore

// spawn.go - the Go peer of aco_rt_bench's spawn+join (bench/bench_rt.sh
// builds and runs it).
//
// One at a time: wg.Add(1); go empty(); wg.Wait(), with GOMAXPROCS=1, so
// each iteration creates a goroutine, runs it to its end (its only work is
// wg.Done) and joins it before the next one is created.  empty is a
// top-level function without arguments, so the go statement allocates no
// closure.
//
//	spawn [-n spawns per segment] [-segments S] [-warmup W] [-procs P] [-batch]
//
// prints `spawn_join_ns <median ns per spawn+run+join over the S segments>`.
//
// -batch: the throughput form (aco_rt_bench pool_spawn's): wg.Add(n), then
// n times `go empty()`, then one wg.Wait(), with GOMAXPROCS=P; prints
// `pool_spawn_ns <median ns per goroutine>`.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"time"
)

var wg sync.WaitGroup

func empty() { wg.Done() }

func main() {
	n := flag.Int("n", 1000000, "spawn+join per timed segment")
	segments := flag.Int("segments", 7, "timed segments (the median is printed)")
	warmup := flag.Int("warmup", 100000, "untimed spawn+join first")
	procs := flag.Int("procs", 1, "GOMAXPROCS")
	batch := flag.Bool("batch", false, "spawn all n, then wait once")
	flag.Parse()
	if *n < 1 || *segments < 1 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "spawn: -n and -segments must be >= 1, -warmup >= 0")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(*procs)
	if *batch {
		per := make([]float64, *segments+1)
		for s := range per { // the first is the warm-up
			t0 := time.Now()
			wg.Add(*n)
			for i := 0; i < *n; i++ {
				go empty()
			}
			wg.Wait()
			per[s] = float64(time.Since(t0).Nanoseconds()) / float64(*n)
		}
		per = per[1:]
		sort.Float64s(per)
		fmt.Printf("pool_spawn_ns %.2f\n", per[len(per)/2])
		return
	}

	for i := 0; i < *warmup; i++ {
		wg.Add(1)
		go empty()
		wg.Wait()
	}
	per := make([]float64, *segments)
	for s := range per {
		t0 := time.Now()
		for i := 0; i < *n; i++ {
			wg.Add(1)
			go empty()
			wg.Wait()
		}
		per[s] = float64(time.Since(t0).Nanoseconds()) / float64(*n)
		fmt.Fprintf(os.Stderr, "spawn: segment %d: %.2f ns\n", s, per[s])
	}
	sort.Float64s(per)
	fmt.Printf("spawn_join_ns %.2f\n", per[len(per)/2])
}
