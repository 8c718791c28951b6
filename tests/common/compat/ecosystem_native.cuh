#pragma once
// The ecosystem of ecosystem_rules.cuh written against soaheap's native API: the reference that
// the DynaSOAr-style program (ecosystem_dynasoar.cuh) must agree with, census by census.

#include <soaheap/soaheap.cuh>

#include "tests/common/compat/ecosystem_rules.cuh"

namespace native_style {

using namespace compat_ecosystem;

class Creature;

class Cell : public soaheap::Object<Cell> {
 public:
  using FieldTypes = soaheap::fields<int, int, soaheap::array<Cell*, 2>, Creature*, int>;
  static constexpr const char* kName = "Cell";
  soaheap::Field<Cell, 0> index;
  soaheap::Field<Cell, 1> food;
  soaheap::Field<Cell, 2> neighbours;
  soaheap::Field<Cell, 3> occupant;
  soaheap::Field<Cell, 4> prey_at_home;

  SOAHEAP_HD Cell(std::uint64_t cell_index, Cell** table) {
    index = static_cast<int>(cell_index);
    food = initial_food(index);
    occupant = nullptr;
    table[cell_index] = this;
  }
  SOAHEAP_HD void link(Cell* const* table) {
    neighbours[0] = table[left_of(index)];
    neighbours[1] = table[right_of(index)];
  }
  template <class View>
  SOAHEAP_HD void populate(const View& heap);
  SOAHEAP_HD void regrow(int amount) { food = regrown(food, amount); }
  template <class View>
  SOAHEAP_HD void cull(const View& heap);
  template <class View>
  SOAHEAP_HD void take_census(const View& heap, unsigned long long* sums);
};

class Creature : public soaheap::Object<Creature> {
 public:
  using FieldTypes = soaheap::fields<Cell*, int, bool>;
  static constexpr const char* kName = "Creature";
  static constexpr bool kAbstract = true;
  soaheap::Field<Creature, 0> home;
  soaheap::Field<Creature, 1> energy;
  soaheap::Field<Creature, 2> housed;

  SOAHEAP_HD Creature(Cell* home_cell, int start_energy, bool is_housed) {
    home = home_cell;
    energy = start_energy;
    housed = is_housed;
  }
  SOAHEAP_HD void metabolize() { energy -= 1; }
  SOAHEAP_HD void report(unsigned long long* sums);
};

class Prey : public soaheap::Object<Prey, Creature> {
 public:
  using FieldTypes = soaheap::fields<int>;
  static constexpr const char* kName = "Prey";
  soaheap::Field<Prey, 0> age;

  SOAHEAP_HD Prey(Cell* home_cell, bool is_housed) : Object(home_cell, kPreyStartEnergy, is_housed) { age = 0; }
  SOAHEAP_HD void graze() { energy += grazing_gain(home->food); }
  template <class View>
  SOAHEAP_HD void reproduce(const View& heap) {
    age += 1;
    if (energy >= kPreyBirthThreshold) {
      energy -= kPreyBirthCost;
      new (heap) Prey(home->neighbours[1], false);
    }
    if (!housed && (age > prey_lifespan(home->index) || energy <= 0)) soaheap::destroy(heap, this);
  }
};

class Predator : public soaheap::Object<Predator, Creature> {
 public:
  using FieldTypes = soaheap::fields<int>;
  static constexpr const char* kName = "Predator";
  soaheap::Field<Predator, 0> meals;

  SOAHEAP_HD explicit Predator(Cell* home_cell) : Object(home_cell, kPredatorStartEnergy, true) { meals = 0; }
  template <class View>
  SOAHEAP_HD void hunt(int meal_energy) {
    const Creature* neighbour = home->neighbours[1]->occupant;
    const std::uint64_t bits = reinterpret_cast<std::uint64_t>(neighbour);
    if (neighbour != nullptr && soaheap::detail::class_id_of(bits) == View::template class_id<Prey>) {
      energy += meal_energy;
      meals += 1;
    }
  }
};

using Heap = soaheap::Heap<Cell, Creature, Prey, Predator>;
using View = Heap::View;

template <class HeapView>
SOAHEAP_HD void Cell::populate(const HeapView& heap) {
  if (starts_with_prey(index)) {
    occupant = new (heap) Prey(this, true);
  } else if (starts_with_predator(index)) {
    occupant = new (heap) Predator(this);
  }
}

template <class HeapView>
SOAHEAP_HD void Cell::cull(const HeapView& heap) {
  Creature* resident = occupant;
  if (resident != nullptr && resident->energy <= 0) {
    soaheap::destroy(heap, resident);
    occupant = nullptr;
  }
}

template <class HeapView>
SOAHEAP_HD void Cell::take_census(const HeapView& heap, unsigned long long* sums) {
  int at_home = 0;
  heap.template for_each_object<Prey>([&](Prey* prey) {
    if (static_cast<Cell*>(prey->home) == this) at_home += 1;
  });
  prey_at_home = at_home;
  add_to_sum(&sums[kPreyAtHome], static_cast<unsigned long long>(at_home));
  add_to_sum(&sums[kFood], static_cast<unsigned long long>(food.get()));
  if (static_cast<Creature*>(occupant) != nullptr) add_to_sum(&sums[kOccupiedCells], 1);
}

SOAHEAP_HD inline void Creature::report(unsigned long long* sums) {
  const bool is_prey = soaheap::detail::class_id_of(reinterpret_cast<std::uint64_t>(this)) == View::class_id<Prey>;
  add_to_sum(&sums[is_prey ? kPreyCount : kPredatorCount], 1);
  add_to_sum(&sums[kCreatureEnergy], static_cast<unsigned long long>(energy > 0 ? energy.get() : 0));
}

/// The same program on a soaheap heap of the same size.
class Program {
 public:
  explicit Program(soaheap::Backend backend)
      : heap_(options(backend)), table_(backend, kCells * sizeof(Cell*)), sums_(backend, sizeof(Census::sums)) {}

  void initialize() {
    heap_.parallel_new<Cell>(kCells, table_.as<Cell*>());
    heap_.parallel_do<Cell, &Cell::link>(static_cast<Cell* const*>(table_.as<Cell*>()));
    heap_.parallel_do<Cell, &Cell::populate<View>>(heap_.view());
  }

  void step(int step_index) {
    const View view = heap_.view();
    heap_.parallel_do<Cell, &Cell::regrow>(kRegrowth);
    heap_.parallel_do<Creature, &Creature::metabolize>();
    heap_.parallel_do<Prey, &Prey::graze>();
    heap_.parallel_do<Predator, &Predator::hunt<View>>(kPredatorMealEnergy);
    heap_.parallel_do<Prey, &Prey::reproduce<View>>(view);
    heap_.parallel_do<Cell, &Cell::cull<View>>(view);
    if ((step_index + 1) % kDefragInterval == 0) soaheap::defragment<Prey>(heap_);
  }

  Census census() {
    sums_.fill_zero();
    heap_.parallel_do<Creature, &Creature::report>(sums_.as<unsigned long long>());
    heap_.parallel_do<Cell, &Cell::take_census<View>>(heap_.view(), sums_.as<unsigned long long>());
    heap_.synchronize();
    Census result;
    sums_.copy_to_host(result.sums, 0, sizeof(result.sums));
    return result;
  }

  Heap& heap() { return heap_; }

 private:
  static soaheap::HeapOptions options(soaheap::Backend backend) {
    soaheap::HeapOptions result;
    result.objects = kHeapObjects;
    result.backend = backend;
    return result;
  }

  Heap heap_;
  soaheap::detail::Memory table_;
  soaheap::detail::Memory sums_;
};

}  // namespace native_style
