// Times cudaMemGetInfo, which a growing application run called after every iteration (docs/decisions/027).
// nvcc -O2 -o memgetinfo-probe tools/gpu/memgetinfo-probe.cu && ./memgetinfo-probe
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
int main() {
  size_t f, t; cudaFree(0); cudaMemGetInfo(&f, &t);
  void* p[64]; for (int i = 0; i < 64; ++i) cudaMalloc(&p[i], 32 << 20);
  for (int rep = 0; rep < 3; ++rep) {
    auto s = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) cudaMemGetInfo(&f, &t);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count() / 1000;
    std::printf("{\"cudaMemGetInfo_us\": %.2f}\n", us);
  }
}
