#pragma once
/// @file departures.cuh
/// @brief Departures: a list that kernels fill with the objects leaving this rank and their
///        destinations, for migrate_departures (migrate.cuh), which then skips the survey of every
///        object. In a kernel: `departures.leave(this, rank)` through the DepartureList handle;
///        appends are aggregated per warp (one atomic per warp, not per object).

#include <soaheap/base/object_pointer.cuh>
#include <soaheap/base/portability.cuh>
#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/memory.cuh>

#include <cstdint>
#include <string>

namespace soaheap::distributed {

/// @brief The device handle of a Departures list (trivially copyable: pass it to kernels).
struct DepartureList {
  std::uint64_t* objects;
  std::int32_t* ranks;
  std::uint64_t* count;  ///< departures recorded (may exceed capacity: those beyond were dropped)
  std::uint64_t capacity;

  /// Records that @p object leaves for @p rank. Record an object at most once per migration step.
  template <class T>
  SOAHEAP_HD void leave(T* object, int rank) const {
    const std::uint64_t at = claim();
    if (at >= capacity) return;  // reported on the host by migrate_departures
    objects[at] = soaheap::detail::object_bits_of(object);
    ranks[at] = rank;
  }

 private:
  /// This thread's entry; one atomic per warp on the GPU.
  SOAHEAP_HD std::uint64_t claim() const {
#if SOAHEAP_DEVICE_CODE
    const unsigned active = __activemask();
    const int leader = __ffs(active) - 1;
    const unsigned lane = threadIdx.x % 32u;
    std::uint64_t base = 0;
    if (static_cast<int>(lane) == leader) base = soaheap::detail::atomic_fetch_add(count, static_cast<std::uint64_t>(__popc(active)));
    base = __shfl_sync(active, base, leader);
    return base + static_cast<std::uint64_t>(__popc(active & ((1u << lane) - 1u)));
#else
    return soaheap::detail::atomic_fetch_add(count, 1);
#endif
  }
};

/// @brief The list's memory, in the heap's backend (device memory for cuda), made once.
class Departures {
 public:
  /// @throw invalid_argument for a capacity of 0
  Departures(Backend backend, std::uint64_t capacity)
      : objects_(backend, capacity * sizeof(std::uint64_t)),
        ranks_(backend, capacity * sizeof(std::int32_t)),
        count_(backend, sizeof(std::uint64_t)),
        capacity_(capacity) {
    if (capacity == 0) throw invalid_argument("soaheap: a Departures list needs a capacity of at least 1");
    count_.fill_zero();
  }
  DepartureList list() const {
    return DepartureList{objects_.as<std::uint64_t>(), ranks_.as<std::int32_t>(), count_.as<std::uint64_t>(), capacity_};
  }
  std::uint64_t capacity() const { return capacity_; }
  /// Departures recorded so far (reads the device counter: synchronizes).
  std::uint64_t recorded() const {
    std::uint64_t value = 0;
    count_.copy_to_host(&value, 0, sizeof(value));
    return value;
  }
  void clear() { count_.fill_zero(); }
  const std::uint64_t* objects() const { return objects_.as<std::uint64_t>(); }
  const std::int32_t* ranks() const { return ranks_.as<std::int32_t>(); }

 private:
  soaheap::detail::Memory objects_;
  soaheap::detail::Memory ranks_;
  soaheap::detail::Memory count_;
  std::uint64_t capacity_;
};

}  // namespace soaheap::distributed
