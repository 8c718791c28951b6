#pragma once
// The rules of the small ecosystem that the DynaSOAr compatibility tests run twice: once written
// against DynaSOAr's API (through compat/shim/dynasoar.h) and once against soaheap's native API.
// Both programs call these functions, so they differ only in how they use the heap, and every
// rule is deterministic whatever order the threads run in: the two must observe the same numbers.
//
// The world: a ring of cells, each with food and two neighbour pointers; creatures (an abstract
// class) are prey or predators with a home cell and energy. A cell's occupant is a creature the cell
// created and alone may destroy; prey born later are unhoused and die of old age by themselves.

#include <soaheap/base/portability.cuh>

#include <cstdint>

namespace compat_ecosystem {

// Enumerators rather than constexpr variables: device code may bind them to references
// (`energy -= kPreyBirthCost` goes through a field proxy's operator-=(const V&)).
enum Parameters : int {
  kCells = 1024,
  kHeapObjects = 64 * 64 * 4,  // room for the smallest class; the run needs far less
  kSteps = 12,
  kDefragInterval = 4,  // steps between defragmentations of the prey
  kMaxFood = 5,
  kRegrowth = 1,
  kPreyStartEnergy = 3,
  kPreyBirthThreshold = 6,
  kPreyBirthCost = 4,
  kPreyMaxAge = 5,
  kPredatorStartEnergy = 6,
  kPredatorMealEnergy = 2,
};

SOAHEAP_HD inline int initial_food(int cell) { return cell % (kMaxFood + 1); }
SOAHEAP_HD inline bool starts_with_prey(int cell) { return cell % 3 == 0; }
SOAHEAP_HD inline bool starts_with_predator(int cell) { return cell % 5 == 1; }
SOAHEAP_HD inline int regrown(int food, int amount) { return food + amount > kMaxFood ? kMaxFood : food + amount; }
SOAHEAP_HD inline int grazing_gain(int food) { return food / 2; }
/// Unhoused prey born on most cells die young, so that the prey blocks fragment and defragmentation
/// has work to do.
SOAHEAP_HD inline int prey_lifespan(int birth_cell) { return birth_cell % 4 == 0 ? kPreyMaxAge : 1; }
SOAHEAP_HD inline int left_of(int cell) { return (cell + kCells - 1) % kCells; }
SOAHEAP_HD inline int right_of(int cell) { return (cell + 1) % kCells; }

/// What a step's census adds up (indices into the sums array both programs keep).
enum Sum : int { kPreyCount, kPredatorCount, kCreatureEnergy, kOccupiedCells, kPreyAtHome, kFood, kSumCount };

/// Adds @p value to a census sum from many threads (CUDA atomics on the device, GCC's on the host).
SOAHEAP_HD inline void add_to_sum(unsigned long long* sum, unsigned long long value) {
#if defined(__CUDA_ARCH__)
  atomicAdd(sum, value);
#else
  __atomic_fetch_add(sum, value, __ATOMIC_RELAXED);
#endif
}

/// One step's census, as both programs report it.
struct Census {
  unsigned long long sums[kSumCount] = {};
  bool operator==(const Census& other) const {
    for (int i = 0; i < kSumCount; ++i)
      if (sums[i] != other.sums[i]) return false;
    return true;
  }
};

}  // namespace compat_ecosystem
