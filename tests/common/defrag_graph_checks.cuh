#pragma once
// What the defragmentation suites check after objects moved: every live object's class and pointer
// targets (as ids) read back through the heap and compared with the graph's spec, and the heap still
// usable; plus the tiny-object (Speck/Dust) kernels.

#include "tests/common/backend_fixture.cuh"
#include "tests/common/defrag_classes.cuh"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace soaheap_test {

/// Expected record of object index @p index of @p spec (what GraphRecord should say).
inline GraphRecord expected_record(const GraphSpec& spec, std::uint64_t index) {
  GraphRecord record{};
  auto id = [&](std::uint64_t i) { return i == kNullId ? kNullId : spec.first_id + i; };
  record.alive = spec.deleted(index) ? 0 : 1;
  if (record.alive == 0) return record;
  record.class_tag = static_cast<std::uint64_t>(spec.kind(index));
  record.partner = record.home = record.next = kNullId;
  for (auto& atom : record.atoms) atom = kNullId;
  if (spec.kind(index) <= 2) {
    record.partner = id(spec.partner_of(index));
    if (spec.kind(index) == 2) record.home = id(spec.home_of(index));
  } else {
    for (int k = 0; k < 3; ++k) record.atoms[k] = id(spec.atom_of(index, k));
    record.next = id(spec.next_of(index));
  }
  return record;
}

/// Reads every live object's class and pointer targets (as ids) through the heap itself.
inline std::vector<GraphRecord> dump_graph(DefragHeap& heap, std::uint64_t id_count) {
  TestBuffer<GraphRecord> records(heap.backend(), id_count);
  heap.parallel_do<Atom, &Atom::dump>(records.data());
  heap.parallel_do<Ion, &Ion::dump_ion>(records.data());
  heap.parallel_do<Molecule, &Molecule::dump>(records.data());
  return records.to_host();
}

/// Checks the dump against the specs of all graphs in the heap; returns the number of live objects.
inline std::uint64_t expect_graphs(const std::vector<GraphRecord>& records, const std::vector<GraphSpec>& specs) {
  std::uint64_t live = 0;
  std::uint64_t mismatches = 0;
  for (const GraphSpec& spec : specs) {
    for (std::uint64_t index = 0; index < spec.size(); ++index) {
      const GraphRecord want = expected_record(spec, index);
      const GraphRecord& got = records[spec.first_id + index];
      live += want.alive;
      bool same = want.alive == got.alive;
      if (same && want.alive) {
        same = want.class_tag == got.class_tag && want.partner == got.partner && want.home == got.home &&
               want.next == got.next && want.atoms[0] == got.atoms[0] && want.atoms[1] == got.atoms[1] &&
               want.atoms[2] == got.atoms[2];
      }
      if (!same && ++mismatches <= 5)
        ADD_FAILURE() << "object id " << spec.first_id + index << ": alive " << got.alive << " (want " << want.alive
                      << "), class " << got.class_tag << " (want " << want.class_tag << "), partner " << got.partner
                      << " (want " << want.partner << "), home " << got.home << " (want " << want.home
                      << "), atoms " << got.atoms[0] << "," << got.atoms[1] << "," << got.atoms[2] << " (want "
                      << want.atoms[0] << "," << want.atoms[1] << "," << want.atoms[2] << "), next " << got.next
                      << " (want " << want.next << ")";
    }
  }
  EXPECT_EQ(mismatches, 0u);
  return live;
}

/// Builds graph @p spec in @p heap: create, link, delete.
inline void build_graph(DefragHeap& heap, TestBuffer<Entity*>& objects, const GraphSpec& spec) {
  TestBuffer<std::uint64_t> failures(heap.backend(), 1);
  heap.launch(spec.size(), CreateGraph{heap.view(), objects.data(), spec, failures.data()});
  ASSERT_EQ(failures.to_host()[0], 0u) << "heap too small for the test graph";
  heap.launch(spec.size(), LinkGraph{heap.view(), objects.data(), spec});
  heap.launch(spec.size(), DeleteGraph{heap.view(), objects.data(), spec});
}

/// After defragmentation: allocation, parallel_do and destroy still work; leaves the heap empty.
inline void expect_heap_still_usable(DefragHeap& heap, std::uint64_t id_count, const std::vector<GraphSpec>& specs) {
  // Find every object at its current address, then add a fresh graph and destroy everything.
  const std::uint64_t extra_first = id_count;
  GraphSpec extra;
  extra.first_id = extra_first;
  extra.atoms = 200;
  extra.ions = 100;
  extra.molecules = 100;
  extra.seed = 4242;
  extra.delete_percent = 30;
  TestBuffer<Entity*> objects(heap.backend(), id_count + extra.size());
  heap.parallel_do<Entity, &Entity::collect>(objects.data());
  build_graph(heap, objects, extra);
  std::vector<GraphSpec> all = specs;
  all.push_back(extra);
  expect_graphs(dump_graph(heap, id_count + extra.size()), all);
  heap.validate(soaheap::Validation::full);
  heap.launch(id_count + extra.size(), DestroyRange{heap.view(), objects.data(), 0});
  heap.validate(soaheap::Validation::full);
  EXPECT_EQ(heap.count<Entity>(), 0u);
  EXPECT_EQ(heap.stats().free_blocks, heap.block_count());
}

// ---- a class too small for forwarding pointers: falls back to records ------------------------------

struct CreateSpecks {
  SpeckHeap::View heap;
  Speck** specks;
  Dust** dust;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    specks[tid] = new (heap) Speck(tid);
    dust[tid] = new (heap) Dust(tid);
  }
};
struct LinkAndThinSpecks {
  SpeckHeap::View heap;
  Speck** specks;
  Dust** dust;
  std::uint64_t count;
  SOAHEAP_HD bool dies(std::uint64_t index) const { return graph_hash(index) % 10 < 7; }
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    const std::uint64_t target = graph_hash(tid + 77) % count;
    dust[tid]->speck = dies(target) ? nullptr : specks[target];
    if (dies(tid)) soaheap::destroy(heap, specks[tid]);
  }
};
struct CheckDust {
  std::uint64_t count;
  std::uint64_t* mismatches;
  SOAHEAP_HD bool dies(std::uint64_t index) const { return graph_hash(index) % 10 < 7; }
  SOAHEAP_HD void check(Dust* dust) const {
    const std::uint64_t target = graph_hash(dust->id + 77) % count;
    const Speck* speck = dust->speck;
    const bool ok = dies(target) ? speck == nullptr : speck != nullptr && speck->id == static_cast<std::uint32_t>(target);
    if (!ok) soaheap::detail::atomic_fetch_add(mismatches, 1);
  }
};
struct CheckAllDust {
  SpeckHeap::View heap;
  CheckDust check;
  SOAHEAP_HD void operator()(std::uint64_t) const {
    heap.for_each_object<Dust>([this](Dust* dust) { check.check(dust); });
  }
};

}  // namespace soaheap_test
