// fiber_pingpong.cpp - the Boost.Fiber peer of aco_rt_bench's channel
// ping-pong (bench/bench_rt.sh builds and runs it).
//
//   fiber_pingpong [round trips per segment [segments [warm-up [threads]]]]
//
// Two fibers on one thread, the default scheduler (round_robin), bounce an
// int over two boost::fibers::unbuffered_channel<int>: A pushes on ch1 and
// pops from ch2, B pops from ch1 and pushes on ch2.  Nothing else is in
// either loop.  One round trip is one push+pop each way.  Both fibers get
// their stacks from pooled_fixedsize_stack at the default size, the
// allocator Boost.Fiber's docs point to when fibers are many or short-lived
// (it only matters when a fiber starts, not inside the loop).  Prints
// `chan_pingpong_ns <median ns per round trip over the segments>`, each
// segment's figure going to stderr.
//
// With a fourth argument "threads": two threads pinned to CPUs 0 and 1,
// both with the shared_work algorithm (one ready queue for all threads;
// suspend=false, its default: an idle thread spins rather than sleep), A
// started on the first and B on the second; either thread may run either
// fiber (so they may end up sharing one, as Go's goroutines may).  The
// other algorithms do worse here: round_robin per thread wakes the other
// thread through a condition variable at every push (~46 us a round trip),
// and work_stealing (Boost 1.74) never finished this loop.  Prints
// `xchan_pingpong_ns ...` then.
//
// Build: g++ -O2 -std=c++17 fiber_pingpong.cpp -lboost_fiber -lboost_context
#include <boost/fiber/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>

namespace fibers = boost::fibers;

using chan_t = fibers::unbuffered_channel<int>;
using clk = std::chrono::steady_clock;

static long parse_arg(const char *s, long min, const char *what) {
    char *end = nullptr;
    long v = std::strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < min) {
        std::fprintf(stderr, "fiber_pingpong: bad %s '%s'\n", what, s);
        std::exit(2);
    }
    return v;
}

int main(int argc, char **argv) {
    long n = 1000000, segments = 7, warmup = 200000;
    bool xthread = false;
    if (argc > 5 || (argc == 5 && !(xthread = std::strcmp(argv[4], "threads") == 0))) {
        std::fprintf(stderr, "usage: fiber_pingpong [n [segments [warmup [threads]]]]\n");
        return 2;
    }
    if (argc > 1) n = parse_arg(argv[1], 1, "round-trip count");
    if (argc > 2) segments = parse_arg(argv[2], 1, "segment count");
    if (argc > 3) warmup = parse_arg(argv[3], 0, "warm-up count");

    chan_t ch1, ch2;
    const long total = warmup + n * segments;
    std::vector<double> per(static_cast<size_t>(segments));
    fibers::pooled_fixedsize_stack stacks;

    auto pin = [](int cpu) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    };
    auto b_body = [&] {
        int v = 0;
        for (long i = 0; i < total; ++i) {
            ch1.pop(v);
            ch2.push(v);
        }
    };
    std::thread other;
    fibers::fiber b;
    // a thread barrier (not a fiber one): both schedulers exist before
    // any fiber starts
    std::mutex both_mu;
    std::condition_variable both_cv;
    int both_n = 0;
    auto both_wait = [&] {
        std::unique_lock<std::mutex> lk(both_mu);
        if (++both_n == 2) both_cv.notify_all();
        else both_cv.wait(lk, [&] { return both_n == 2; });
    };
    fibers::mutex done_mu;
    fibers::condition_variable done_cv;
    bool done = false;
    if (xthread) {
        pin(0);
        fibers::use_scheduling_algorithm<fibers::algo::shared_work>();
        other = std::thread([&] {
            pin(1);
            fibers::use_scheduling_algorithm<fibers::algo::shared_work>();
            both_wait();
            fibers::fiber fb(std::allocator_arg, stacks, b_body);
            fb.detach();
            std::unique_lock<fibers::mutex> lk(done_mu);
            done_cv.wait(lk, [&] { return done; });
        });
        both_wait();
    } else {
        b = fibers::fiber(std::allocator_arg, stacks, b_body);
    }
    fibers::fiber a(std::allocator_arg, stacks, [&] {
        int v = 0;
        for (long i = 0; i < warmup; ++i) {
            ch1.push(static_cast<int>(i));
            ch2.pop(v);
        }
        for (long s = 0; s < segments; ++s) {
            auto t0 = clk::now();
            for (long i = 0; i < n; ++i) {
                ch1.push(static_cast<int>(i));
                ch2.pop(v);
            }
            std::chrono::duration<double, std::nano> d = clk::now() - t0;
            per[static_cast<size_t>(s)] = d.count() / static_cast<double>(n);
        }
    });
    a.join();
    if (xthread) {
        {
            std::unique_lock<fibers::mutex> lk(done_mu);
            done = true;
        }
        done_cv.notify_all();
        other.join();
    } else {
        b.join();
    }

    for (long s = 0; s < segments; ++s)
        std::fprintf(stderr, "fiber_pingpong: segment %ld: %.2f ns\n", s,
                     per[static_cast<size_t>(s)]);
    std::sort(per.begin(), per.end());
    std::printf("%s %.2f\n", xthread ? "xchan_pingpong_ns" : "chan_pingpong_ns", per[per.size() / 2]);
    return 0;
}
