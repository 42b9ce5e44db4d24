// Runs CUDA device code on the CPU, to check a kernel's arithmetic and indexing where no GPU is
// (tests/codegen/test_flagship_cuda_emulated.py): one std::thread per CUDA thread, the blocks of a
// grid one after another, __syncthreads() a barrier of the block's threads, __shared__ arrays
// static (one block runs at a time). Timing, memory ordering and warp behaviour are not emulated.
#pragma once

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

using std::fabs;
inline float fabsf(float v) { return std::fabs(v); }
#define __global__
#define __device__
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct uint3 {
    unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct float4 {
    float x, y, z, w;
};
struct double2 {
    double x, y;
};

inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 gridDim, blockDim;
inline std::barrier<>* emulated_block_barrier = nullptr;
inline void __syncthreads() { emulated_block_barrier->arrive_and_wait(); }

// kernel() on every thread of the grid; a grid with a zero size launches nothing, as the host
// side that opsdk writes for a declared launch does. Returns the number of blocks run.
inline int64_t emulate_launch(dim3 grid, dim3 block, const std::function<void()>& kernel) {
    if (!grid.x || !grid.y || !grid.z) return 0;
    const unsigned threads = block.x * block.y * block.z;
    int64_t blocks = 0;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx, ++blocks) {
                std::barrier<> barrier(threads);
                emulated_block_barrier = &barrier;
                std::vector<std::thread> team;
                for (unsigned t = 0; t < threads; ++t)
                    team.emplace_back([&, t] {
                        threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                        blockIdx = {bx, by, bz};
                        gridDim = grid, blockDim = block;
                        kernel();
                    });
                for (auto& th : team) th.join();
            }
    return blocks;
}
