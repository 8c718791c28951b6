#pragma once
// Managed classes shared by the test suites: several sizes, an abstract base, pointer fields and
// pointer arrays (for reflection and defragmentation tests).

#include <soaheap/soaheap.cuh>

#include <cstdint>

namespace soaheap_test {

class Node;
class Counter;

/// Abstract root: every test object carries a unique id so that tests can follow objects.
class Item : public soaheap::Object<Item> {
 public:
  using FieldTypes = soaheap::fields<std::uint64_t>;
  static constexpr const char* kName = "Item";
  static constexpr bool kAbstract = true;
  soaheap::Field<Item, 0> id;
};

/// Smallest class: 16 bytes, 64 per block.
class Small : public soaheap::Object<Small, Item> {
 public:
  using FieldTypes = soaheap::fields<std::uint64_t>;
  static constexpr const char* kName = "Small";
  soaheap::Field<Small, 0> payload;

  SOAHEAP_HD Small(std::uint64_t new_id, std::uint64_t new_payload) {
    id = new_id;
    payload = new_payload;
  }

  /// Creates a Counter of value @p base + id: a parallel_do over Small that changes another class.
  /// (Created as C: Counter is defined below, so the type waits for the instantiation.)
  template <class HeapView, class C = Counter>
  SOAHEAP_HD void make_counter(const HeapView& heap, std::uint64_t base) {
    new (heap) C(0, base + static_cast<std::uint64_t>(id));
  }
};

/// 40 bytes: capacity floor(64*16/40) = 25, with a scalar pointer to the base and a pointer array.
class Node : public soaheap::Object<Node, Item> {
 public:
  using FieldTypes = soaheap::fields<Item*, soaheap::array<Node*, 2>, std::uint64_t>;
  static constexpr const char* kName = "Node";
  soaheap::Field<Node, 0> link;
  soaheap::Field<Node, 1> children;
  soaheap::Field<Node, 2> weight;

  SOAHEAP_HD explicit Node(std::uint64_t new_id) {
    id = new_id;
    link = nullptr;
    children[0] = nullptr;
    children[1] = nullptr;
    weight = 0;
  }
  SOAHEAP_HD void add_weight(std::uint64_t amount) { weight += amount; }
};

/// Derives from Node: 48 bytes, capacity 21.
class HeavyNode : public soaheap::Object<HeavyNode, Node> {
 public:
  using FieldTypes = soaheap::fields<double>;
  static constexpr const char* kName = "HeavyNode";
  soaheap::Field<HeavyNode, 0> mass;

  SOAHEAP_HD HeavyNode(std::uint64_t new_id, double new_mass) : Object(new_id) { mass = new_mass; }
};

/// A class of exactly one 64-byte object per slot-sized unit, for capacity-64 blocks of 1 field.
class Counter : public soaheap::Object<Counter> {
 public:
  using FieldTypes = soaheap::fields<std::uint64_t, std::uint64_t>;
  static constexpr const char* kName = "Counter";
  soaheap::Field<Counter, 0> value;
  soaheap::Field<Counter, 1> visits;

  SOAHEAP_HD Counter(std::uint64_t index, std::uint64_t start) {
    value = start + index;
    visits = 0;
  }
  SOAHEAP_HD void visit() { visits += 1; }
  SOAHEAP_HD void add_visits(std::uint64_t count) { visits += count; }
  template <class HeapView>
  SOAHEAP_HD void die_if_multiple_of(const HeapView& heap, std::uint64_t divisor) {
    if (value % divisor == 0) soaheap::destroy(heap, this);
  }

  /// A class constant without a device definition (only its value may be used in device code) and
  /// a field as the operand of another field's compound assignment.
  static const std::uint64_t kBumpStep = 3;
  SOAHEAP_HD void bump() {
    visits += kBumpStep;
    value -= visits;
  }

  /// Values of the Counters that visit_and_spawn creates: the call that created them times this,
  /// plus their creator's value.
  static constexpr std::uint64_t kGenerationStep = 1000000000;
  /// Visits and, when its value (below kGenerationStep: created by parallel_new) is a multiple of
  /// @p divisor, creates a Counter of value @p generation · kGenerationStep + its own, which the
  /// running parallel_do must not visit.
  template <class HeapView>
  SOAHEAP_HD void visit_and_spawn(const HeapView& heap, std::uint64_t divisor, std::uint64_t generation) {
    visits += 1;
    const std::uint64_t own_value = value;
    if (own_value < kGenerationStep && own_value % divisor == 0) new (heap) Counter(0, generation * kGenerationStep + own_value);
  }

  /// Visits, creates a new Counter (which the running parallel_do must not visit) and destroys
  /// itself when its value is a multiple of 3.
  template <class HeapView>
  SOAHEAP_HD void spawn_and_maybe_die(const HeapView& heap) {
    visits += 1;
    const std::uint64_t own_value = value;
    new (heap) Counter(0, 1000000 + own_value);
    if (own_value % 3 == 0) soaheap::destroy(heap, this);
  }
};

using TestHeap = soaheap::Heap<Item, Small, Node, HeavyNode, Counter>;

}  // namespace soaheap_test
