#pragma once
/// @file portability.cuh
/// @brief The thin layer that lets every algorithm be written once for the cuda and host backends:
///        function qualifiers, 64-bit atomics, bit tricks and fences.

#include <chrono>
#include <cstdint>
#include <thread>

#if defined(__CUDACC__)
#define SOAHEAP_HD __host__ __device__
#define SOAHEAP_HAS_CUDA 1
#else
#define SOAHEAP_HD
#define SOAHEAP_HAS_CUDA 0
#endif

// Inlines a function into its caller even where the compiler's size heuristics would not. For the
// allocation paths: a kernel that calls one out of line copies the heap view to local memory per
// thread and pays a call (decision 008). Only the compiler's own inline hint on the host.
#if defined(__CUDACC__)
#define SOAHEAP_FORCE_INLINE __forceinline__
#else
#define SOAHEAP_FORCE_INLINE inline
#endif

// Keeps a short loop rolled in device code, where nvcc unrolls loops of unknown trip count at every
// inlined call site; host compilers do not know the pragma.
#if defined(__CUDA_ARCH__)
#define SOAHEAP_NO_UNROLL _Pragma("unroll 1")
#else
#define SOAHEAP_NO_UNROLL
#endif

// Some lambdas/functors are host+device; when compiled by plain g++ the qualifiers vanish.
#if defined(__CUDA_ARCH__)
#define SOAHEAP_DEVICE_CODE 1
#else
#define SOAHEAP_DEVICE_CODE 0
#endif

// Unrolls the next loop completely (its trip count must be a constant) in device code and with GCC.
#if defined(__CUDA_ARCH__)
#define SOAHEAP_UNROLL _Pragma("unroll")
#elif defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define SOAHEAP_UNROLL _Pragma("GCC unroll 16")
#else
#define SOAHEAP_UNROLL
#endif

// Unrolls the next loop four times in device code, so that independent loads of four iterations
// can be in flight together (device_do over a full block: the body is compiled four times, not 64).
#if defined(__CUDA_ARCH__)
#define SOAHEAP_UNROLL_4 _Pragma("unroll 4")
#else
#define SOAHEAP_UNROLL_4
#endif

// Keeps the next loop rolled in device code: its body is compiled once (code size and build time).
#if defined(__CUDA_ARCH__)
#define SOAHEAP_NO_UNROLL _Pragma("unroll 1")
#else
#define SOAHEAP_NO_UNROLL
#endif

namespace soaheap::detail {

// On the device, plain 64-bit atomics (relaxed) plus explicit __threadfence() where ordering
// matters. On the host, GCC's __atomic builtins: seq_cst, understood by ThreadSanitizer.

SOAHEAP_HD inline std::uint64_t atomic_load(const std::uint64_t* address) {
#if SOAHEAP_DEVICE_CODE
  return *reinterpret_cast<const volatile unsigned long long*>(address);
#else
  return __atomic_load_n(address, __ATOMIC_SEQ_CST);
#endif
}

SOAHEAP_HD inline std::uint32_t atomic_load(const std::uint32_t* address) {
#if SOAHEAP_DEVICE_CODE
  return *reinterpret_cast<const volatile unsigned int*>(address);
#else
  return __atomic_load_n(address, __ATOMIC_SEQ_CST);
#endif
}

SOAHEAP_HD inline void atomic_store(std::uint64_t* address, std::uint64_t value) {
#if SOAHEAP_DEVICE_CODE
  atomicExch(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value));
#else
  __atomic_store_n(address, value, __ATOMIC_SEQ_CST);
#endif
}

SOAHEAP_HD inline void atomic_store(std::uint32_t* address, std::uint32_t value) {
#if SOAHEAP_DEVICE_CODE
  atomicExch(reinterpret_cast<unsigned int*>(address), value);
#else
  __atomic_store_n(address, value, __ATOMIC_SEQ_CST);
#endif
}

SOAHEAP_HD inline std::uint64_t atomic_fetch_or(std::uint64_t* address, std::uint64_t mask) {
#if SOAHEAP_DEVICE_CODE
  return atomicOr(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(mask));
#else
  return __atomic_fetch_or(address, mask, __ATOMIC_SEQ_CST);
#endif
}

SOAHEAP_HD inline std::uint64_t atomic_fetch_and(std::uint64_t* address, std::uint64_t mask) {
#if SOAHEAP_DEVICE_CODE
  return atomicAnd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(mask));
#else
  return __atomic_fetch_and(address, mask, __ATOMIC_SEQ_CST);
#endif
}

SOAHEAP_HD inline std::uint64_t atomic_fetch_add(std::uint64_t* address, std::uint64_t value) {
#if SOAHEAP_DEVICE_CODE
  return atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value));
#else
  return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
#endif
}

/// Adds @p value without reading the old value: a reduction that the memory system completes on its
/// own, so the thread does not wait for it (an atomic whose result is used waits a round trip, longer
/// when many threads add to the same word). Relaxed, like the other atomics here.
SOAHEAP_HD inline void atomic_add_no_return(std::uint64_t* address, std::uint64_t value) {
#if SOAHEAP_DEVICE_CODE
  asm volatile("red.relaxed.gpu.add.u64 [%0], %1;" ::"l"(address), "l"(value) : "memory");
#else
  __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
#endif
}

/// atomic_add_no_return for 32-bit counters.
SOAHEAP_HD inline void atomic_add_no_return(std::uint32_t* address, std::uint32_t value) {
#if SOAHEAP_DEVICE_CODE
  asm volatile("red.relaxed.gpu.add.u32 [%0], %1;" ::"l"(address), "r"(value) : "memory");
#else
  __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
#endif
}

/// fetch_or with acquire ordering: the caller's later reads see what the writer published before
/// the value this read-modify-write observed (a lighter alternative to fetch_or + full fence).
SOAHEAP_HD inline std::uint64_t atomic_fetch_or_acquire(std::uint64_t* address, std::uint64_t mask) {
#if SOAHEAP_DEVICE_CODE
  unsigned long long before;
  asm volatile("atom.acquire.gpu.global.or.b64 %0, [%1], %2;"
               : "=l"(before)
               : "l"(address), "l"(static_cast<unsigned long long>(mask))
               : "memory");
  return before;
#else
  return __atomic_fetch_or(address, mask, __ATOMIC_SEQ_CST);
#endif
}

/// atomicMax for unsigned 64-bit values; returns the value found at @p address.
SOAHEAP_HD inline std::uint64_t atomic_max(std::uint64_t* address, std::uint64_t value) {
#if SOAHEAP_DEVICE_CODE
  return atomicMax(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value));
#else
  std::uint64_t current = __atomic_load_n(address, __ATOMIC_SEQ_CST);
  while (current < value &&
         !__atomic_compare_exchange_n(address, &current, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return current;
#endif
}

/// Compare-and-swap (of 64 or 32 bits); returns the value found at @p address.
SOAHEAP_HD inline std::uint64_t atomic_cas(std::uint64_t* address, std::uint64_t expected, std::uint64_t desired) {
#if SOAHEAP_DEVICE_CODE
  return atomicCAS(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(expected),
                   static_cast<unsigned long long>(desired));
#else
  __atomic_compare_exchange_n(address, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
#endif
}
SOAHEAP_HD inline std::uint32_t atomic_cas(std::uint32_t* address, std::uint32_t expected, std::uint32_t desired) {
#if SOAHEAP_DEVICE_CODE
  return atomicCAS(reinterpret_cast<unsigned int*>(address), expected, desired);
#else
  __atomic_compare_exchange_n(address, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
#endif
}

/// A relaxed store the thread does not wait for (atomic_store is an exchange on the device, whose
/// answer it waits for): for runs of stores that a fence then orders before their publication.
SOAHEAP_HD inline void atomic_store_relaxed(std::uint32_t* address, std::uint32_t value) {
#if SOAHEAP_DEVICE_CODE
  asm volatile("st.relaxed.gpu.u32 [%0], %1;" ::"l"(address), "r"(value) : "memory");
#else
  __atomic_store_n(address, value, __ATOMIC_SEQ_CST);
#endif
}
SOAHEAP_HD inline void atomic_store_relaxed(std::uint64_t* address, std::uint64_t value) {
#if SOAHEAP_DEVICE_CODE
  asm volatile("st.relaxed.gpu.u64 [%0], %1;" ::"l"(address), "l"(value) : "memory");
#else
  __atomic_store_n(address, value, __ATOMIC_SEQ_CST);
#endif
}

/// Exchange; returns the value found at @p address.
SOAHEAP_HD inline std::uint64_t atomic_exchange(std::uint64_t* address, std::uint64_t desired) {
#if SOAHEAP_DEVICE_CODE
  return atomicExch(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(desired));
#else
  return __atomic_exchange_n(address, desired, __ATOMIC_SEQ_CST);
#endif
}

/// Orders this thread's earlier memory operations before its later ones, device-wide.
SOAHEAP_HD inline void memory_fence() {
#if SOAHEAP_DEVICE_CODE
  __threadfence();
#else
  // Host atomics are all seq_cst, so they are already totally ordered with each other; a fence
  // would add nothing (and ThreadSanitizer does not model fences).
#endif
}

/// Release ordering for publication (store data; release_fence(); store flag): cheaper than the
/// sequentially consistent memory_fence() where no later load must be ordered after a store.
SOAHEAP_HD inline void release_fence() {
#if SOAHEAP_DEVICE_CODE
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
#endif
}

#if SOAHEAP_DEVICE_CODE
/// All 32 lanes of a warp.
inline constexpr unsigned kFullWarp = 0xffffffffu;

/// This lane's index in its warp (the hardware's, valid for any block shape).
__device__ inline int lane_id() {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return static_cast<int>(lane);
}

/// Lanes of the warp below this one (a mask).
__device__ inline unsigned lanes_below() {
  unsigned mask;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(mask));
  return mask;
}

/// Lets the kernel launched after this one with programmatic stream serialization
/// (Executor::launch_after_previous) start launching now; it still waits for this kernel's
/// completion and memory before it reads anything this kernel wrote. Before sm_90, nothing.
__device__ inline void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// @brief True when every lane of the calling warp executes this call together. Only such a
/// group may be served by one leader that shuffles its result to the others (warp aggregation):
/// see "Warp aggregation" in docs/architecture.md for why a smaller group is not safe.
__device__ inline bool whole_warp_converged() { return __activemask() == kFullWarp; }

/// The GPU's global nanosecond clock (%globaltimer): one time base for every SM, so stamps taken by
/// different warps of a launch can be compared.
__device__ inline std::uint64_t global_nanoseconds() {
  std::uint64_t nanoseconds;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(nanoseconds));
  return nanoseconds;
}

/// Sum of @p value over the 32 lanes of a converged warp (every lane gets it).
__device__ inline std::uint64_t whole_warp_sum(std::uint64_t value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullWarp, value, offset);
  return value;
}
#endif

/// Pauses a thread that found nothing to do because others are mid-way, for longer each @p round.
SOAHEAP_HD inline void back_off(int round) {
  const int shift = round < 10 ? round : 10;
#if SOAHEAP_DEVICE_CODE
  __nanosleep(64u << shift);
#else
  if (shift < 3) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(1 << shift));
  }
#endif
}

SOAHEAP_HD inline int popcount(std::uint64_t value) {
#if SOAHEAP_DEVICE_CODE
  return __popcll(value);
#else
  return __builtin_popcountll(value);
#endif
}

/// Index of the lowest set bit; -1 when @p value is 0.
SOAHEAP_HD inline int lowest_set_bit(std::uint64_t value) {
#if SOAHEAP_DEVICE_CODE
  return __ffsll(static_cast<long long>(value)) - 1;
#else
  return value == 0 ? -1 : __builtin_ctzll(value);
#endif
}

SOAHEAP_HD inline std::uint64_t rotate_right(std::uint64_t value, int amount) {
  amount &= 63;
  return amount == 0 ? value : (value >> amount) | (value << (64 - amount));
}

/// Cheap integer hash used to derive seeds from thread ids and retry counts.
SOAHEAP_HD inline std::uint32_t mix_seed(std::uint64_t value) {
  value ^= value >> 33;
  value *= 0xff51afd7ed558ccdULL;
  value ^= value >> 33;
  return static_cast<std::uint32_t>(value);
}

/// Position of the @p n-th (0-based) set bit of @p value; @p value must have more than n bits.
/// Halves the word six times by the set bits in its lower part (no loop over the bits).
SOAHEAP_HD inline int nth_set_bit(std::uint64_t value, int n) {
  int position = 0;
  for (int width = 32; width != 0; width /= 2) {
    const int below = popcount(value & ((std::uint64_t{1} << width) - 1));
    if (n >= below) {
      n -= below;
      value >>= width;
      position += width;
    }
  }
  return position;
}

/// A set bit of @p value chosen by @p seed, every set bit equally likely; -1 when @p value is 0.
/// Threads with different seeds spread over the set bits. A rotation (the first set bit at or
/// after a seed-chosen position, as in DynaSOAr) picks a bit in proportion to the clear bits before
/// it: where the few set bits of a word lie together (the upper bitmap levels of a heap that fills
/// from its start, or is nearly full) the one after the long run of clear bits took nearly every
/// pick, and the threads crowded into the same blocks (docs/decisions/029-uniform-bit-pick.md).
SOAHEAP_HD inline int pick_set_bit(std::uint64_t value, std::uint32_t seed) {
  if (value == 0) return -1;
  const auto count = static_cast<std::uint64_t>(popcount(value));
  return nth_set_bit(value, static_cast<int>((static_cast<std::uint64_t>(mix_seed(seed)) * count) >> 32));
}

/// The first set bit of @p value at or after position seed mod 64, wrapping around (DynaSOAr's
/// rotation); -1 when @p value is 0. Biased towards the set bit after a run of clear ones, which
/// suits the size classes of soaheap::malloc (see BitPick).
SOAHEAP_HD inline int rotating_set_bit(std::uint64_t value, std::uint32_t seed) {
  if (value == 0) return -1;
  const int rotation = static_cast<int>(seed & 63u);
  return (lowest_set_bit(rotate_right(value, rotation)) + rotation) & 63;
}

/// How a lookup picks among the set bits of a word. Objects pick uniformly (pick_set_bit; decision
/// 029: the rotation crowded applications' threads into a few blocks); the untyped size classes of
/// soaheap::malloc rotate (rotating_set_bit) where they take a free block and a slot, which starts
/// their blocks faster where many threads start blocks at once (decision 032).
enum class BitPick : std::uint8_t { uniform, rotating };

SOAHEAP_HD inline int pick_set_bit(std::uint64_t value, std::uint32_t seed, BitPick pick) {
  return pick == BitPick::rotating ? rotating_set_bit(value, seed) : pick_set_bit(value, seed);
}

/// A mask of the lowest @p count bits (count in 0..64).
SOAHEAP_HD inline constexpr std::uint64_t low_bits(int count) {
  return count >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << count) - 1;
}

}  // namespace soaheap::detail
