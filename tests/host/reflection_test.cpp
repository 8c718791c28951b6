// Reflection DSL: compile-time queries (checked with static_assert, so a wrong answer fails the
// build) and the runtime behaviour of field proxies.
#include "tests/common/test_classes.cuh"

#include <gtest/gtest.h>

namespace soaheap_test {

using soaheap::field_can_point_to_v;

static_assert(soaheap::is_managed_v<Small> && soaheap::is_managed_v<Item> && !soaheap::is_managed_v<int>);
static_assert(soaheap::field_count_v<Item> == 1);
static_assert(soaheap::field_count_v<Node> == 4);       // id + link + children + weight
static_assert(soaheap::field_count_v<HeavyNode> == 5);  // inherited first
static_assert(std::is_same_v<soaheap::type_at_t<soaheap::all_field_types_t<HeavyNode>, 4>, double>);
static_assert(soaheap::object_size_v<Small> == 16 && soaheap::object_size_v<Node> == 40);
// Item* can point at any Item subclass; Node* at Node and HeavyNode but not Small.
static_assert(field_can_point_to_v<Item*, Small> && field_can_point_to_v<Item*, HeavyNode>);
static_assert(field_can_point_to_v<Node*, HeavyNode> && !field_can_point_to_v<Node*, Small>);
static_assert(field_can_point_to_v<soaheap::array<Node*, 2>, Node>);
static_assert(!field_can_point_to_v<HeavyNode*, Node>);  // a derived pointer cannot hold a base object
static_assert(!field_can_point_to_v<std::uint64_t, Node> && !field_can_point_to_v<int*, Node>);
static_assert(soaheap::pointer_field_extent_v<soaheap::array<Node*, 2>> == 2);
static_assert(TestHeap::capacity<Small> == 64 && TestHeap::capacity<Node> == 25 && TestHeap::capacity<HeavyNode> == 21);
static_assert(TestHeap::Layout::kDataBytes == 1024);
static_assert(TestHeap::class_id<Node> == 2);

TEST(Reflection, ClassNamesAndAbstractness) {
  EXPECT_STREQ(TestHeap::class_name(TestHeap::class_id<HeavyNode>), "HeavyNode");
  EXPECT_EQ(TestHeap::class_id_by_name("Counter"), TestHeap::class_id<Counter>);
  EXPECT_EQ(TestHeap::class_id_by_name("Nope"), -1);
  EXPECT_TRUE(TestHeap::class_is_abstract(TestHeap::class_id<Item>));
  EXPECT_FALSE(TestHeap::class_is_abstract(TestHeap::class_id<Node>));
}

TEST(Reflection, SoaArraysOfSubclassesShareTheBasePrefix) {
  using NodeFields = soaheap::all_field_types_t<Node>;
  using HeavyFields = soaheap::all_field_types_t<HeavyNode>;
  for (int capacity : {1, 21, 25, 64}) {
    EXPECT_EQ((soaheap::detail::soa_array_offset<NodeFields, 2>(capacity)),
              (soaheap::detail::soa_array_offset<HeavyFields, 2>(capacity)));
  }
  // Capacity 64 with 8-byte fields: every array starts on a 128-byte boundary.
  EXPECT_EQ((soaheap::detail::soa_array_offset<HeavyFields, 4>(64)) % 128, 0u);
}

TEST(Reflection, ProxyFieldsBehaveLikeMembers) {
  soaheap::HeapOptions options;
  options.objects = 64 * 8;
  TestHeap heap(options);
  Node* node = new (heap) Node(7);
  HeavyNode* heavy = new (heap) HeavyNode(8, 2.0);
  node->weight = 10;
  node->weight += 5;
  node->weight *= 2;
  node->weight -= 1;
  ++node->weight;
  EXPECT_EQ(node->weight, 30u);
  node->children[1] = heavy;
  node->link = heavy;
  heavy->mass /= 4;
  EXPECT_EQ(node->children[1]->id, 8u);  // array element, then ->
  EXPECT_EQ(node->link->id, 8u);         // base-class pointer field
  EXPECT_DOUBLE_EQ(heavy->mass, 0.5);
  heavy->weight = node->weight;          // field-to-field assignment copies the value
  EXPECT_EQ(heavy->weight, 30u);
  // Distinct objects do not alias.
  EXPECT_NE(&node->weight.get(), &heavy->weight.get());
  soaheap::destroy(heap, static_cast<Item*>(heavy));
  soaheap::destroy(heap, node);
  heap.validate();
  EXPECT_EQ(heap.count<Item>(), 0u);
}

}  // namespace soaheap_test

// device_do's slot pointers (make_object_pointer_for_slot) must be the very bits
// make_object_pointer gives, for every slot, capacity and class of a valid (128-aligned, 47-bit)
// data address; the two differ only in where the compiler can see the mask applied.
TEST(ObjectPointers, SlotPointersHaveTheBitsOfObjectPointers) {
  using namespace soaheap::detail;
  const std::uint64_t addresses[] = {0, kObjectAlignment, 0x7f12'3456'7880, kAddressMask & ~(kObjectAlignment - 1)};
  std::uint64_t compared = 0;
  for (const std::uint64_t address : addresses)
    for (int slot = 0; slot < kSlotsPerBlock; ++slot)
      for (int capacity = 1; capacity <= kSlotsPerBlock; capacity += 7)
        for (int class_id = 0; class_id < kMaxClasses; class_id += 5) {
          const std::uint64_t expected = make_object_pointer(address, slot, capacity, class_id);
          ASSERT_EQ(make_object_pointer_for_slot(address, slot, capacity, class_id), expected)
              << "address " << address << ", slot " << slot << ", capacity " << capacity << ", class " << class_id;
          ASSERT_EQ(slot_of(expected), slot);
          ASSERT_EQ(capacity_of(expected), capacity);
          ASSERT_EQ(class_id_of(expected), class_id);
          ++compared;
        }
  EXPECT_EQ(compared, 4u * 64u * 10u * 7u);
}
