// fiber_pingpong.cpp - the Boost.Fiber peer of aco_rt_bench's channel
// ping-pong (rt/bench/bench_rt.sh builds and runs it).
//
//   fiber_pingpong [round trips per segment [segments [warm-up]]]
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
// Build: g++ -O2 -std=c++17 fiber_pingpong.cpp -lboost_fiber -lboost_context
#include <boost/fiber/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

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
    if (argc > 4) {
        std::fprintf(stderr, "usage: fiber_pingpong [n [segments [warmup]]]\n");
        return 2;
    }
    if (argc > 1) n = parse_arg(argv[1], 1, "round-trip count");
    if (argc > 2) segments = parse_arg(argv[2], 1, "segment count");
    if (argc > 3) warmup = parse_arg(argv[3], 0, "warm-up count");

    chan_t ch1, ch2;
    const long total = warmup + n * segments;
    std::vector<double> per(static_cast<size_t>(segments));
    fibers::pooled_fixedsize_stack stacks;

    fibers::fiber b(std::allocator_arg, stacks, [&] {
        int v = 0;
        for (long i = 0; i < total; ++i) {
            ch1.pop(v);
            ch2.push(v);
        }
    });
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
    b.join();

    for (long s = 0; s < segments; ++s)
        std::fprintf(stderr, "fiber_pingpong: segment %ld: %.2f ns\n", s,
                     per[static_cast<size_t>(s)]);
    std::sort(per.begin(), per.end());
    std::printf("chan_pingpong_ns %.2f\n", per[per.size() / 2]);
    return 0;
}
