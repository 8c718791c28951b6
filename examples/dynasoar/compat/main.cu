// Fireworks (see fireworks.h): a DynaSOAr-style program built against soaheap through the
// compatibility shim. Usage: dynasoar_compat [iterations]. Prints one line per iteration
// (live sparks, spark slots in use and allocated, rockets) and at the end the running time and
// enumeration time in microseconds, as DynaSOAr's examples do; exits non-zero when the heap
// disagrees with a sequential replay of the same rules.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fireworks.h"

__device__ AllocatorT* device_allocator;
AllocatorHandle<AllocatorT>* allocator_handle;

__device__ unsigned long long checksum;  // live sparks' remaining life, summed

__device__ Rocket::Rocket(int index, int first_id)
    : id_(first_id + index), fuel_(rocket_fuel(first_id + index)), altitude_(0.0f) {}

__device__ void Rocket::fly() {
  altitude_ += 1.0f;
  fuel_ -= 1;
  if (fuel_ == 0) {
    for (int spark = 0; spark < sparks_of(id_); ++spark) {
      new (device_allocator) Spark(altitude_, spark_life(id_, spark));
    }
    destroy(device_allocator, this);
  }
}

__device__ Spark::Spark(float altitude, int life) : altitude_(altitude), brightness_(1.0f), life_(life) {}

__device__ void Spark::fade() {
  brightness_ *= 0.5f;
  altitude_ -= 0.25f;
  life_ -= 1;
  if (life_ == 0) destroy(device_allocator, this);
}

__device__ void Spark::add_to_checksum() {
#ifdef __CUDA_ARCH__
  atomicAdd(&checksum, static_cast<unsigned long long>(life_.get()));
#else
  __atomic_fetch_add(&checksum, static_cast<unsigned long long>(life_.get()), __ATOMIC_RELAXED);
#endif
}

struct Observation {
  unsigned long long checksum = 0;
  unsigned int sparks = 0;
  unsigned int spark_slots = 0;
  unsigned int rockets = 0;
};

#ifdef __CUDACC__
__global__ void observe_kernel(Observation* out) {
  out->sparks = device_allocator->DBG_used_slots<Spark>();
  out->spark_slots = device_allocator->DBG_allocated_slots<Spark>();
  out->rockets = device_allocator->DBG_used_slots<Rocket>();
  out->checksum = checksum;
}
#endif

Observation observe() {
  Observation result;
#ifdef __CUDACC__
  const unsigned long long zero = 0;
  gpuErrchk(cudaMemcpyToSymbol(checksum, &zero, sizeof(zero)));
  allocator_handle->parallel_do<Spark, &Spark::add_to_checksum>();
  Observation* device_result = nullptr;
  gpuErrchk(cudaMalloc(&device_result, sizeof(Observation)));
  observe_kernel<<<1, 1>>>(device_result);
  gpuErrchk(cudaMemcpy(&result, device_result, sizeof(Observation), cudaMemcpyDeviceToHost));
  gpuErrchk(cudaFree(device_result));
#else
  checksum = 0;
  allocator_handle->parallel_do<Spark, &Spark::add_to_checksum>();
  result.sparks = device_allocator->DBG_used_slots<Spark>();
  result.spark_slots = device_allocator->DBG_allocated_slots<Spark>();
  result.rockets = device_allocator->DBG_used_slots<Rocket>();
  result.checksum = checksum;
#endif
  return result;
}

void step(int iteration) {
  if (iteration % kSalvoInterval == 0) {
    allocator_handle->parallel_new<Rocket>(kSalvoSize, iteration / kSalvoInterval * kSalvoSize);
  }
  allocator_handle->parallel_do<Spark, &Spark::fade>();
  allocator_handle->fast_parallel_do<Rocket, &Rocket::fly>();
  if ((iteration + 1) % kDefragInterval == 0) allocator_handle->parallel_defrag<Spark>();
}

// The same rules replayed sequentially on plain host data: what observe() must report.
struct Replay {
  std::vector<int> rocket_ids, rocket_fuel, spark_lives;

  Observation step(int iteration) {
    if (iteration % kSalvoInterval == 0) {
      for (int i = 0; i < kSalvoSize; ++i) {
        const int id = iteration / kSalvoInterval * kSalvoSize + i;
        rocket_ids.push_back(id);
        rocket_fuel.push_back(::rocket_fuel(id));
      }
    }
    std::vector<int> lives;
    for (int life : spark_lives)
      if (life > 1) lives.push_back(life - 1);
    std::vector<int> ids, fuel;
    for (std::size_t r = 0; r < rocket_ids.size(); ++r) {
      if (rocket_fuel[r] == 1) {
        for (int spark = 0; spark < sparks_of(rocket_ids[r]); ++spark) lives.push_back(spark_life(rocket_ids[r], spark));
      } else {
        ids.push_back(rocket_ids[r]);
        fuel.push_back(rocket_fuel[r] - 1);
      }
    }
    rocket_ids.swap(ids);
    rocket_fuel.swap(fuel);
    spark_lives.swap(lives);
    Observation expected;
    for (int life : spark_lives) expected.checksum += static_cast<unsigned long long>(life);
    expected.sparks = static_cast<unsigned int>(spark_lives.size());
    expected.rockets = static_cast<unsigned int>(rocket_ids.size());
    return expected;
  }
};

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 30;
  if (iterations <= 0) {
    std::fprintf(stderr, "dynasoar_compat: iterations must be a positive number, got '%s'\n", argv[1]);
    return 2;
  }

  allocator_handle = new AllocatorHandle<AllocatorT>();
  AllocatorT* dev_ptr = allocator_handle->device_pointer();
#ifdef __CUDACC__
  gpuErrchk(cudaMemcpyToSymbol(device_allocator, &dev_ptr, sizeof(AllocatorT*), 0, cudaMemcpyHostToDevice));
#else
  device_allocator = dev_ptr;
#endif

  Replay replay;
  long long total_time = 0;
  int mismatches = 0;
  for (int i = 0; i < iterations; ++i) {
    const auto time_before = std::chrono::high_resolution_clock::now();
    step(i);
    const auto time_after = std::chrono::high_resolution_clock::now();
    total_time += std::chrono::duration_cast<std::chrono::microseconds>(time_after - time_before).count();

    const Observation seen = observe();
    const Observation expected = replay.step(i);
    std::printf("%d,%llu,%u,%u,%u\n", i, seen.checksum, seen.sparks, seen.spark_slots, seen.rockets);
    if (seen.checksum != expected.checksum || seen.sparks != expected.sparks || seen.rockets != expected.rockets ||
        seen.spark_slots < seen.sparks) {
      std::fprintf(stderr, "iteration %d: expected checksum %llu, %u sparks, %u rockets\n", i, expected.checksum,
                   expected.sparks, expected.rockets);
      ++mismatches;
    }
  }
  allocator_handle->DBG_print_state_stats();
  allocator_handle->DBG_print_defrag_time();
  std::printf("%lld, %lu\n", total_time, allocator_handle->DBG_get_enumeration_time());
  delete allocator_handle;
  return mismatches == 0 ? 0 : 1;
}
