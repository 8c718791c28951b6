#pragma once
// The ecosystem of ecosystem_rules.cuh written as a DynaSOAr program: DynaSOAr's class DSL,
// AllocatorHandle, a global allocator pointer for device code, `new (device_allocator) T(...)`,
// `destroy(device_allocator, p)`, device_do, parallel_new / parallel_do / fast_parallel_do /
// parallel_defrag through the handle. It includes "dynasoar.h" as DynaSOAr programs do; the build
// puts compat/shim first on the include path.

#include "dynasoar.h"
#include "tests/common/compat/ecosystem_rules.cuh"

#include <memory>

namespace dynasoar_style {

using namespace compat_ecosystem;

class Cell;
class Creature;
class Prey;
class Predator;

using AllocatorT = SoaAllocator<kHeapObjects, Cell, Creature, Prey, Predator>;

__device__ AllocatorT* device_allocator;
__device__ Cell* cell_table[kCells];
__device__ unsigned long long census_sums[kSumCount];

class Cell : public AllocatorT::Base {
 public:
  declare_field_types(Cell, int, int, DeviceArray<Cell*, 2>, Creature*, int)

 private:
  Field<Cell, 0> index_;
  Field<Cell, 1> food_;
  Field<Cell, 2> neighbors_;  // left, right
  Field<Cell, 3> occupant_;
  SoaField<Cell, 4> prey_at_home_;

 public:
  __device__ explicit Cell(int index) : index_(index), food_(initial_food(index)), occupant_(nullptr) {}

  __device__ int index() const { return index_; }
  __device__ int food() const { return food_; }
  __device__ Cell* right() const { return neighbors_[1]; }
  __device__ Creature* occupant() const { return occupant_; }
  __device__ void count_prey_at_home() { prey_at_home_ += 1; }

  __device__ void register_in_table() { cell_table[index_] = this; }
  __device__ void link() {
    neighbors_[0] = cell_table[left_of(index_)];
    neighbors_[1] = cell_table[right_of(index_)];
  }
  __device__ void populate();
  __device__ void regrow(int amount) { food_ = regrown(food_, amount); }
  __device__ void cull();
  __device__ void take_census();
};

class Creature : public SoaBase<AllocatorT> {
 public:
  declare_field_types(Creature, Cell*, int, bool)
  static const bool kIsAbstract = true;

 protected:
  Field<Creature, 0> home_;
  Field<Creature, 1> energy_;
  Field<Creature, 2> housed_;

 public:
  __device__ Creature(Cell* home, int energy, bool housed) : home_(home), energy_(energy), housed_(housed) {}
  __device__ int energy() const { return energy_; }
  __device__ void metabolize() { energy_ -= 1; }
  __device__ void report();
  /// Also runs on the host: AllocatorHandle::device_do from host code.
  __device__ __host__ void add_energy_to(long long* total) { *total += energy_; }
};

class Prey : public Creature {
 public:
  declare_field_types(Prey, int)
  using BaseClass = Creature;
  static const bool kIsAbstract = false;

 private:
  Field<Prey, 0> age_;

 public:
  __device__ Prey(Cell* home, bool housed) : Creature(home, kPreyStartEnergy, housed), age_(0) {}
  __device__ void graze() { energy_ += grazing_gain(home_->food()); }
  __device__ void reproduce() {
    age_ += 1;
    if (energy_ >= kPreyBirthThreshold) {
      energy_ -= kPreyBirthCost;
      new (device_allocator) Prey(home_->right(), false);
    }
    if (!housed_ && (age_ > prey_lifespan(home_->index()) || energy_ <= 0)) destroy(device_allocator, this);
  }
  __device__ void visit_home_of(Cell* cell) {
    if (home_ == cell) cell->count_prey_at_home();
  }
};

class Predator : public Creature {
 public:
  declare_field_types(Predator, int)
  using BaseClass = Creature;
  static const bool kIsAbstract = false;  // as in DynaSOAr, kIsAbstract is inherited otherwise

 private:
  Field<Predator, 0> meals_;

 public:
  __device__ explicit Predator(Cell* home) : Creature(home, kPredatorStartEnergy, true), meals_(0) {}
  __device__ void hunt(int meal_energy) {
    Creature* neighbour = home_->right()->occupant();
    if (neighbour != nullptr && neighbour->cast<Prey>() != nullptr) {
      energy_ += meal_energy;
      meals_ += 1;
    }
  }
};

__device__ inline void Cell::populate() {
  if (starts_with_prey(index_)) {
    occupant_ = new (device_allocator) Prey(this, true);
  } else if (starts_with_predator(index_)) {
    occupant_ = new (device_allocator) Predator(this);
  }
}

__device__ inline void Cell::cull() {
  if (occupant_ != nullptr && occupant_->energy() <= 0) {
    destroy(device_allocator, occupant_);
    occupant_ = nullptr;
  }
}

__device__ inline void Cell::take_census() {
  prey_at_home_ = 0;
  device_allocator->template device_do<Prey>(&Prey::visit_home_of, this);
  add_to_sum(&census_sums[kPreyAtHome], static_cast<unsigned long long>(prey_at_home_.get()));
  add_to_sum(&census_sums[kFood], static_cast<unsigned long long>(food_.get()));
  if (occupant_ != nullptr) add_to_sum(&census_sums[kOccupiedCells], 1);
}

__device__ inline void Creature::report() {
  add_to_sum(&census_sums[cast<Prey>() != nullptr ? kPreyCount : kPredatorCount], 1);
  add_to_sum(&census_sums[kCreatureEnergy], static_cast<unsigned long long>(energy_ > 0 ? energy_.get() : 0));
}

/// The program's host side, as a DynaSOAr main() would hold it (here an object so that tests can run
/// it twice and look at its state).
class Program {
 public:
  Program() : handle_(std::make_unique<AllocatorHandle<AllocatorT>>()) {
    AllocatorT* allocator = handle_->device_pointer();
#if defined(__CUDACC__)
    gpuErrchk(cudaMemcpyToSymbol(device_allocator, &allocator, sizeof(AllocatorT*), 0, cudaMemcpyHostToDevice));
#else
    device_allocator = allocator;
#endif
  }

  void initialize() {
    handle_->parallel_new<Cell>(kCells);
    handle_->parallel_do<Cell, &Cell::register_in_table>();
    handle_->parallel_do<Cell, &Cell::link>();
    handle_->parallel_do<Cell, &Cell::populate>();
  }

  void step(int step_index) {
    handle_->parallel_do<Cell, int, &Cell::regrow>(kRegrowth);
    handle_->parallel_do<Creature, &Creature::metabolize>();
    handle_->fast_parallel_do<Prey, &Prey::graze>();
    handle_->parallel_do<Predator, &Predator::hunt>(kPredatorMealEnergy);
    handle_->parallel_do<Prey, &Prey::reproduce>();
    handle_->parallel_do<Cell, &Cell::cull>();
    if ((step_index + 1) % kDefragInterval == 0) handle_->parallel_defrag<Prey>();
    handle_->DBG_collect_stats();
  }

  Census census() {
    const Census zero;
#if defined(__CUDACC__)
    gpuErrchk(cudaMemcpyToSymbol(census_sums, zero.sums, sizeof(zero.sums)));
#else
    for (int i = 0; i < kSumCount; ++i) census_sums[i] = zero.sums[i];
#endif
    handle_->parallel_do<Creature, &Creature::report>();
    handle_->parallel_do<Cell, &Cell::take_census>();
    Census result;
#if defined(__CUDACC__)
    gpuErrchk(cudaMemcpyFromSymbol(result.sums, census_sums, sizeof(result.sums)));
#else
    for (int i = 0; i < kSumCount; ++i) result.sums[i] = census_sums[i];
#endif
    return result;
  }

  AllocatorHandle<AllocatorT>& handle() { return *handle_; }

 private:
  std::unique_ptr<AllocatorHandle<AllocatorT>> handle_;
};

}  // namespace dynasoar_style
