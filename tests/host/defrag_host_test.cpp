// The defragmentation suite on the host backend (both compaction and both rewrite strategies), plus host-only checks.
#include "tests/common/defrag_suite.inc"

#include <soaheap/defrag/policy.hpp>

#include <memory>

namespace soaheap_test {

/// A kernel body that tries to defragment the heap it runs on (host backend only).
struct DefragFromInsideAKernel {
  DefragHeap* heap;
  void operator()(std::uint64_t) const { soaheap::defragment<Atom>(*heap); }
};

TEST_P(DefragTest, RefusedWhileAnOperationIsInFlight) {
  DefragHeap heap(heap_options(1000));
  try {
    heap.launch(1, DefragFromInsideAKernel{&heap});
    ADD_FAILURE() << "defrag inside a running launch must be refused";
  } catch (const soaheap::usage_error& error) {
    EXPECT_NE(std::string(error.what()).find("defrag"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("in flight"), std::string::npos) << error.what();
  }
  // Once the launch is over, defragmentation works again.
  EXPECT_NO_THROW(soaheap::defragment<Atom>(heap));
  heap.validate(soaheap::Validation::full);
}

/// A fragmented graph for the policy tests.
inline void build_fragmented(DefragHeap& heap, TestBuffer<Entity*>& objects, const GraphSpec& spec) {
  build_graph(heap, objects, spec);
  ASSERT_GT(heap.stats().of("Atom").candidate_blocks, 10u);
}

TEST_P(DefragTest, PolicyManualNeverRuns) {
  GraphSpec spec;
  spec.atoms = 3000;
  spec.molecules = 1000;
  spec.delete_percent = 70;
  DefragHeap heap(heap_options(2 * spec.size()));
  TestBuffer<Entity*> objects(backend(), spec.size());
  build_fragmented(heap, objects, spec);
  soaheap::DefragPolicy policy(soaheap::DefragConfig{});
  for (long long iteration = 0; iteration < 10; ++iteration) EXPECT_TRUE(policy.maybe_defrag(heap, iteration).empty());
}

TEST_P(DefragTest, PolicyEveryMIterations) {
  GraphSpec spec;
  spec.atoms = 3000;
  spec.molecules = 1000;
  spec.delete_percent = 70;
  DefragHeap heap(heap_options(2 * spec.size()));
  TestBuffer<Entity*> objects(backend(), spec.size());
  build_fragmented(heap, objects, spec);
  soaheap::DefragConfig config;
  config.policy = soaheap::DefragPolicyKind::every;
  config.every = 5;
  config.factor = 2;
  config.classes["Molecule"].factor = 3;
  soaheap::DefragPolicy policy(config);
  EXPECT_TRUE(policy.maybe_defrag(heap, 0).empty());
  EXPECT_TRUE(policy.maybe_defrag(heap, 4).empty());
  const std::vector<soaheap::DefragResult> results = policy.maybe_defrag(heap, 5);
  ASSERT_FALSE(results.empty());
  bool atom_done = false;
  for (const auto& result : results) {
    atom_done |= result.class_name == "Atom";
    EXPECT_NE(result.class_name, "Entity") << "the policy defragments concrete classes";
  }
  EXPECT_TRUE(atom_done);
  EXPECT_EQ(heap.defrag_factor(DefragHeap::class_id<Atom>), 2);
  EXPECT_EQ(heap.defrag_factor(DefragHeap::class_id<Molecule>), 3);
  expect_fragmentation_bound<Atom>(heap, 2);
  expect_graphs(dump_graph(heap, spec.size()), {spec});
  heap.validate(soaheap::Validation::full);
  // Right after a run nothing is left to do at the next multiple of m.
  for (const auto& result : policy.maybe_defrag(heap, 10)) EXPECT_EQ(result.blocks_freed, 0u);
}

TEST_P(DefragTest, PolicyAfterMassDeallocation) {
  GraphSpec spec;
  spec.atoms = 6000;
  spec.delete_percent = 0;
  spec.null_percent = 100;  // no links: the deletion below would leave them dangling
  DefragHeap heap(heap_options(2 * spec.size()));
  TestBuffer<Entity*> objects(backend(), spec.size());
  build_graph(heap, objects, spec);
  soaheap::DefragConfig config;
  config.policy = soaheap::DefragPolicyKind::mass;
  config.factor = 3;
  config.mass_threshold = soaheap::MassThreshold{40, false};  // scaled by 3/4: 30 candidates
  soaheap::DefragPolicy policy(config);
  EXPECT_EQ(soaheap::DefragPolicy::scaled_mass_threshold(40, 3), 30);
  EXPECT_TRUE(policy.maybe_defrag(heap, 1).empty()) << "no candidates yet";
  // Delete every object of most blocks' worth: 60 % of the Atoms.
  GraphSpec thinned = spec;
  thinned.delete_percent = 60;
  heap.launch(spec.size(), DeleteGraph{heap.view(), objects.data(), thinned});
  const std::uint64_t candidates = heap.stats().of("Atom").candidate_blocks;
  ASSERT_GE(candidates, 30u);
  const std::vector<soaheap::DefragResult> results = policy.maybe_defrag(heap, 2);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].class_name, "Atom");
  EXPECT_GT(results[0].blocks_freed, 0u);
  EXPECT_TRUE(policy.maybe_defrag(heap, 3).empty()) << "candidates are below the threshold after the run";
  heap.validate(soaheap::Validation::full);
}

TEST_P(DefragTest, PolicyAutoCompactsToTheMinimumWithinItsBudget) {
  GraphSpec spec;
  spec.atoms = 4000;
  spec.molecules = 1500;
  spec.delete_percent = 60;
  DefragHeap heap(heap_options(4 * spec.size()));
  TestBuffer<Entity*> objects(backend(), spec.size());
  build_fragmented(heap, objects, spec);
  soaheap::DefragConfig config;
  config.policy = soaheap::DefragPolicyKind::automatic;
  config.auto_budget = 1.0;  // everything may go to defragmentation
  soaheap::DefragPolicy generous(config);
  EXPECT_TRUE(generous.maybe_defrag(heap, 0).empty()) << "the first call only starts the clock";
  const std::vector<soaheap::DefragResult> results = generous.maybe_defrag(heap, 1);
  ASSERT_FALSE(results.empty());
  const soaheap::HeapStats stats = heap.stats();
  for (const char* name : {"Atom", "Molecule"}) {
    const soaheap::ClassStats& entry = stats.of(name);
    const auto capacity = static_cast<std::uint64_t>(entry.capacity);
    EXPECT_EQ(entry.allocated_blocks, (entry.used_slots + capacity - 1) / capacity) << name;
  }
  EXPECT_GT(generous.auto_spent_ms(), 0.0);
  expect_graphs(dump_graph(heap, spec.size()), {spec});
  heap.validate(soaheap::Validation::full);
  EXPECT_TRUE(generous.maybe_defrag(heap, 2).empty()) << "nothing left to gain";

  // A tiny budget: one run (its cost is unknown before), then nothing until the runtime pays for it.
  GraphSpec more = spec;
  more.first_id = spec.size();
  more.seed = 99;
  TestBuffer<Entity*> more_objects(backend(), 2 * spec.size());
  build_graph(heap, more_objects, more);
  config.auto_budget = 1e-9;
  soaheap::DefragPolicy frugal(config);
  EXPECT_TRUE(frugal.maybe_defrag(heap, 0).empty());
  EXPECT_FALSE(frugal.maybe_defrag(heap, 1).empty());
  GraphSpec third = more;  // fragments the heap again (its pointers stay inside it)
  third.first_id = 2 * spec.size();
  third.seed = 100;
  TestBuffer<Entity*> third_objects(backend(), 3 * spec.size());
  build_graph(heap, third_objects, third);
  ASSERT_GT(heap.stats().of("Atom").candidate_blocks, 10u);
  EXPECT_TRUE(frugal.maybe_defrag(heap, 2).empty()) << "the budget is spent";
  EXPECT_GT(frugal.auto_spent_ms(), config.auto_budget * frugal.auto_elapsed_ms());
}

TEST_P(DefragTest, PolicyRunsKeepObjectsInTheConfiguredLocalityWindow) {
  if (compaction() != soaheap::CompactionStrategy::plan) GTEST_SKIP() << "the policies always use the plan strategy";
  constexpr long long kWindow = 64;  // blocks
  // The window comes per class for `every` and globally for `auto` (whose runs use target minimum).
  soaheap::DefragConfig every;
  every.policy = soaheap::DefragPolicyKind::every;
  every.every = 1;
  every.factor = 3;
  for (const char* name : {"Atom", "Ion", "Molecule"}) every.classes[name].locality_window = kWindow;
  soaheap::DefragConfig automatic;
  automatic.policy = soaheap::DefragPolicyKind::automatic;
  automatic.auto_budget = 1.0;
  automatic.locality_window = kWindow;
  for (const soaheap::DefragConfig& config : {every, automatic}) {
    SCOPED_TRACE(std::string("policy ") + std::string(soaheap::to_string(config.policy)));
    GraphSpec spec;
    spec.atoms = 12000;
    spec.ions = 2000;
    spec.molecules = 3000;
    spec.seed = 909;
    spec.delete_percent = 55;
    DefragHeap heap(heap_options(4 * spec.size()));
    TestBuffer<Entity*> objects(backend(), spec.size());
    build_fragmented(heap, objects, spec);
    ASSERT_GT(heap.block_count(), 2 * static_cast<std::uint64_t>(kWindow)) << "the test needs several windows";
    TestBuffer<Entity*> before(backend(), spec.size());
    TestBuffer<Entity*> after(backend(), spec.size());
    heap.parallel_do<Entity, &Entity::collect>(before.data());
    soaheap::DefragPolicy policy(config);
    EXPECT_TRUE(policy.maybe_defrag(heap, 0).empty());  // every: iteration 0 never runs; auto: starts its clock
    const std::vector<soaheap::DefragResult> results = policy.maybe_defrag(heap, 1);
    ASSERT_FALSE(results.empty());
    std::uint64_t reported = 0;
    for (const soaheap::DefragResult& result : results) reported += result.objects_moved;
    heap.parallel_do<Entity, &Entity::collect>(after.data());
    EXPECT_GT(reported, 0u);
    EXPECT_EQ(expect_moves_within_windows(heap, before.to_host(), after.to_host(), kWindow), reported);
    expect_graphs(dump_graph(heap, spec.size()), {spec});
    heap.validate(soaheap::Validation::full);
  }
}

TEST_P(DefragTest, PolicyNeedsItsParameter) {
  soaheap::DefragConfig every;
  every.policy = soaheap::DefragPolicyKind::every;
  EXPECT_THROW(soaheap::DefragPolicy{every}, soaheap::config_error);
  soaheap::DefragConfig mass;
  mass.policy = soaheap::DefragPolicyKind::mass;
  EXPECT_THROW(soaheap::DefragPolicy{mass}, soaheap::config_error);
  // A per-class n that does not fit the class is reported when the policy meets the heap.
  DefragHeap heap(heap_options(1000));
  soaheap::DefragConfig bad;
  bad.policy = soaheap::DefragPolicyKind::every;
  bad.every = 1;
  bad.classes["Molecule"].factor = 25;  // capacity 25
  soaheap::DefragPolicy policy(bad);
  EXPECT_THROW(policy.maybe_defrag(heap, 1), soaheap::config_error);
}

INSTANTIATE_TEST_SUITE_P(Host, DefragTest, defrag_parameters(soaheap::Backend::host), defrag_parameter_name);

// ---- orders in the policies ---------------------------------------------------------------------------

/// Atoms (and Ions) by the id of what their partner points to is not a key a kernel can read
/// cheaply; their own id is.
struct AtomById {
  SOAHEAP_HD std::uint64_t operator()(const Atom* atom) const { return atom->id.get(); }
};

/// A fragmented graph on the host backend, its heap and a policy over it.
struct PolicyGraph {
  GraphSpec spec;
  DefragHeap heap;
  TestBuffer<Entity*> objects;
  explicit PolicyGraph(std::uint64_t heap_objects_per_object = 4)
      : spec(make_spec()), heap(host_options(heap_objects_per_object * spec.size())), objects(soaheap::Backend::host, spec.size()) {
    build_graph(heap, objects, spec);
  }
  static GraphSpec make_spec() {
    GraphSpec spec;
    spec.atoms = 4000;
    spec.molecules = 1000;
    spec.delete_percent = 60;
    return spec;
  }
  static soaheap::HeapOptions host_options(std::uint64_t objects) {
    soaheap::HeapOptions options;
    options.objects = objects;
    options.backend = soaheap::Backend::host;
    options.host_threads = 4;
    return options;
  }
  /// Whether the Atoms' ids ascend in heap order.
  bool atoms_in_id_order() const {
    std::vector<std::uint64_t> ids;
    heap.for_each<Atom>([&](const Atom* atom) {
      if (soaheap::detail::class_id_of(soaheap::detail::object_bits_of(atom)) == DefragHeap::class_id<Atom>)
        ids.push_back(atom->id.get());
    });
    return std::is_sorted(ids.begin(), ids.end());
  }
};

soaheap::DefragConfig every_config(long long every) {
  soaheap::DefragConfig config;
  config.policy = soaheap::DefragPolicyKind::every;
  config.every = every;
  return config;
}

TEST(DefragPolicyOrders, TheDefaultOrderIsUsedWhenTheConfigurationSaysNothing) {
  PolicyGraph graph;
  ASSERT_FALSE(graph.atoms_in_id_order());
  soaheap::DefragPolicy policy(every_config(1));
  policy.define_order<Atom>(graph.heap, "key:id", soaheap::order_by_key(AtomById{}));
  const std::vector<soaheap::DefragResult> results = policy.maybe_defrag(graph.heap, 1);
  bool atom_ordered = false;
  for (const auto& result : results) {
    if (result.class_name == "Atom") atom_ordered = result.ordered;
    if (result.class_name == "Molecule") {
      EXPECT_FALSE(result.ordered) << "Molecules have no order";
    }
  }
  EXPECT_TRUE(atom_ordered);
  EXPECT_TRUE(graph.atoms_in_id_order());
  expect_graphs(dump_graph(graph.heap, graph.spec.size()), {graph.spec});
  graph.heap.validate(soaheap::Validation::full);
}

TEST(DefragPolicyOrders, TheConfigurationPicksAnOrderOrNone) {
  {
    PolicyGraph graph;
    soaheap::DefragConfig config = every_config(1);
    config.classes["Atom"].order = "none";
    soaheap::DefragPolicy policy(config);
    policy.define_order<Atom>(graph.heap, "key:id", soaheap::order_by_key(AtomById{}));
    for (const auto& result : policy.maybe_defrag(graph.heap, 1)) EXPECT_FALSE(result.ordered) << result.class_name;
    EXPECT_FALSE(graph.atoms_in_id_order());
  }
  {
    PolicyGraph graph;
    soaheap::DefragConfig config = every_config(1);
    config.classes["Atom"].order = "key:id";
    soaheap::DefragPolicy policy(config);
    policy.define_order<Atom>(graph.heap, "field:partner", soaheap::order_by_pointer_field<&Atom::partner>());
    policy.define_order<Atom>(graph.heap, "key:id", soaheap::order_by_key(AtomById{}));
    policy.maybe_defrag(graph.heap, 1);
    EXPECT_TRUE(graph.atoms_in_id_order()) << "the configured order, not the first defined one";
  }
  {
    PolicyGraph graph;
    soaheap::DefragConfig config = every_config(1);
    config.classes["Atom"].order = "key:mass";
    soaheap::DefragPolicy policy(config);
    policy.define_order<Atom>(graph.heap, "key:id", soaheap::order_by_key(AtomById{}));
    try {
      policy.maybe_defrag(graph.heap, 1);
      ADD_FAILURE() << "an order the application does not define must be refused";
    } catch (const soaheap::config_error& error) {
      EXPECT_EQ(error.key(), "defrag.classes.Atom.order");
      EXPECT_NE(std::string(error.what()).find("\"key:mass\""), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find("it defines: key:id"), std::string::npos) << error.what();
    }
  }
}

TEST(DefragPolicyOrders, BadOrDuplicateNamesAreRefused) {
  PolicyGraph graph;
  soaheap::DefragPolicy policy(every_config(1));
  for (const std::string bad : {"id", "none", "key:", "field:a b"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(policy.define_order<Atom>(graph.heap, bad, soaheap::order_by_key(AtomById{})), soaheap::invalid_argument);
  }
  policy.define_order<Atom>(graph.heap, "key:id", soaheap::order_by_key(AtomById{}));
  EXPECT_THROW(policy.define_order<Atom>(graph.heap, "key:id", soaheap::order_by_key(AtomById{})),
               soaheap::invalid_argument);
}

/// A graph whose heap of an eighth more blocks than its objects need is too full for an ordered
/// run of Atom (it gathers the class into fresh blocks).
GraphSpec graph_for_a_full_heap() {
  GraphSpec spec;
  spec.atoms = 6000;
  spec.molecules = 200;
  spec.seed = 5;
  spec.delete_percent = 60;
  return spec;
}

TEST(DefragPolicyOrders, WithoutFreeBlocksThePolicyCompactsInPlace) {
  const GraphSpec spec = graph_for_a_full_heap();
  DefragHeap heap(PolicyGraph::host_options(spec.size() + spec.size() / 8));
  TestBuffer<Entity*> objects(soaheap::Backend::host, spec.size());
  build_graph(heap, objects, spec);
  const std::uint64_t needed = (heap.count<Atom>() + DefragHeap::capacity<Atom> - 1) / DefragHeap::capacity<Atom>;
  ASSERT_LT(heap.stats().free_blocks, needed) << "the test needs a heap too small for an ordered run";
  soaheap::DefragPolicy policy(every_config(1));
  policy.define_order<Atom>(heap, "key:id", soaheap::order_by_key(AtomById{}));
  std::vector<soaheap::DefragResult> results;
  EXPECT_NO_THROW(results = policy.maybe_defrag(heap, 1));
  bool atom_compacted = false;
  for (const auto& result : results) {
    if (result.class_name != "Atom") continue;
    atom_compacted = true;
    EXPECT_FALSE(result.ordered);
    EXPECT_GT(result.blocks_freed, 0u);
  }
  EXPECT_TRUE(atom_compacted);
  expect_graphs(dump_graph(heap, spec.size()), {spec});
  heap.validate(soaheap::Validation::full);
}

TEST(DefragPolicyOrders, OnAGrowableHeapMapFreshBlocksKeepsTheOrderByMappingWhatItLacks) {
  const GraphSpec spec = graph_for_a_full_heap();
  for (const bool map_fresh_blocks : {false, true}) {
    SCOPED_TRACE(map_fresh_blocks ? "map_fresh_blocks" : "default");
    soaheap::HeapOptions options = PolicyGraph::host_options(spec.size() + spec.size() / 8);
    options.max_bytes = std::uint64_t{256} << 20;  // growable, started as small as the test above
    DefragHeap heap(options);
    TestBuffer<Entity*> objects(soaheap::Backend::host, spec.size());
    build_graph(heap, objects, spec);
    const std::uint64_t needed = (heap.count<Atom>() + DefragHeap::capacity<Atom> - 1) / DefragHeap::capacity<Atom>;
    ASSERT_LT(heap.stats().free_blocks, needed) << "the test needs a heap too small for an ordered run";
    const std::uint64_t mapped_before = heap.mapped_block_count();
    soaheap::DefragConfig config = every_config(1);
    config.map_fresh_blocks = map_fresh_blocks;
    soaheap::DefragPolicy policy(config);
    policy.define_order<Atom>(heap, "key:id", soaheap::order_by_key(AtomById{}));
    const std::vector<soaheap::DefragResult> results = policy.maybe_defrag(heap, 1);
    bool atom_compacted = false;
    for (const auto& result : results) {
      if (result.class_name != "Atom") continue;
      atom_compacted = true;
      EXPECT_EQ(result.ordered, map_fresh_blocks) << "an ordered run with the fresh blocks mapped, else in place";
    }
    EXPECT_TRUE(atom_compacted);
    if (map_fresh_blocks) {
      EXPECT_GT(heap.mapped_block_count(), mapped_before);
    } else {
      EXPECT_EQ(heap.mapped_block_count(), mapped_before) << "without the setting the policy maps nothing";
    }
    std::vector<std::uint64_t> ids;
    heap.for_each<Atom>([&](const Atom* atom) {
      if (soaheap::detail::class_id_of(soaheap::detail::object_bits_of(atom)) == DefragHeap::class_id<Atom>)
        ids.push_back(atom->id.get());
    });
    if (map_fresh_blocks) {
      EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end())) << "the Atoms in id order";
    }
    expect_graphs(dump_graph(heap, spec.size()), {spec});
    heap.validate(soaheap::Validation::full);
  }
}

/// The auto policy with a budget that never stops it (its reorders are what these tests watch).
soaheap::DefragConfig unbounded_auto_config() {
  soaheap::DefragConfig config;
  config.policy = soaheap::DefragPolicyKind::automatic;
  config.auto_budget = 1.0;
  return config;
}

TEST(DefragPolicyOrders, AutoReordersAfterItsWarmupAndKeepsTheGraph) {
  PolicyGraph graph;
  soaheap::DefragPolicy policy(unbounded_auto_config());
  policy.define_order<Atom>(graph.heap, "key:id", soaheap::order_by_key(AtomById{}));
  bool reordered = false;
  for (long long iteration = 0; iteration <= soaheap::DefragPolicy::kAutoReorderWarmup; ++iteration) {
    for (const auto& result : policy.maybe_defrag(graph.heap, iteration)) {
      if (result.class_name == "Atom" && result.ordered) reordered = true;
    }
  }
  EXPECT_TRUE(reordered) << "the first reorder comes right after the warmup (it measures cost and gain)";
  EXPECT_EQ(policy.auto_reorders(), 1);
  EXPECT_TRUE(graph.atoms_in_id_order());
  expect_graphs(dump_graph(graph.heap, graph.spec.size()), {graph.spec});
  graph.heap.validate(soaheap::Validation::full);
}

// release_memory on a growable heap whose iterations need more memory than lives between them:
// each makes a transient graph and destroys it, beside a persistent population with holes for the
// policy to compact. Giving the transient memory back after every compaction would map it again
// at the next iteration; the policy waits until the heap stops growing.
TEST(DefragPolicyRelease, GivesMemoryBackOnlyOnceTheHeapStopsGrowing) {
  soaheap::HeapOptions options;
  options.backend = soaheap::Backend::host;
  options.host_threads = 4;
  options.objects = 1024;
  options.max_bytes = std::uint64_t{256} << 20;
  options.growth_headroom = 64;  // the first transient graph grows the heap twentyfold in one kernel
  DefragHeap heap(options);
  constexpr std::uint64_t kPersistent = 1000, kTransient = 20000;
  constexpr int kIterations = 40;
  constexpr std::uint64_t kIds = kIterations * kPersistent + kTransient;
  TestBuffer<Entity*> objects(soaheap::Backend::host, kIds);
  soaheap::DefragConfig config;
  config.policy = soaheap::DefragPolicyKind::every;
  config.every = 1;
  config.release_memory = true;
  soaheap::DefragPolicy policy(config);
  // Every object a call moves is in its results: a program refreshes the pointers it keeps outside
  // the heap by them (the automata's cell maps), also after a call that only gave memory back.
  std::uint64_t moved_by_releases = 0;
  const auto maybe_defrag = [&](long long iteration) {
    heap.parallel_do<Entity, &Entity::collect>(objects.data());
    const std::vector<Entity*> before = objects.to_host();
    const std::uint64_t mapped = heap.mapped_block_count();
    const std::vector<soaheap::DefragResult> results = policy.maybe_defrag(heap, iteration);
    heap.parallel_do<Entity, &Entity::collect>(objects.data());
    const std::vector<Entity*> after = objects.to_host();
    std::uint64_t moved = 0, reported = 0;
    for (std::uint64_t id = 0; id < kIds; ++id) moved += before[id] != after[id] ? 1 : 0;
    for (const soaheap::DefragResult& result : results) reported += result.objects_moved;
    EXPECT_GE(reported, moved) << "iteration " << iteration;
    if (heap.mapped_block_count() < mapped) moved_by_releases += moved;
  };
  std::vector<GraphSpec> live;
  int releases = 0;
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    heap.parallel_do<Entity, &Entity::collect>(objects.data());  // addresses after the last compaction
    GraphSpec persistent;
    persistent.first_id = static_cast<std::uint64_t>(iteration) * kPersistent;
    persistent.atoms = kPersistent / 2;
    persistent.molecules = kPersistent / 2;
    persistent.seed = 100 + static_cast<std::uint64_t>(iteration);
    persistent.delete_percent = 60;
    build_graph(heap, objects, persistent);
    live.push_back(persistent);
    GraphSpec transient;
    transient.first_id = kIterations * kPersistent;
    transient.atoms = kTransient;
    transient.delete_percent = 0;
    transient.null_percent = 100;
    build_graph(heap, objects, transient);
    heap.launch(kTransient, DestroyRange{heap.view(), objects.data(), transient.first_id});
    const std::uint64_t mapped = heap.mapped_block_count();
    maybe_defrag(iteration);
    if (heap.mapped_block_count() < mapped) ++releases;
    heap.validate(soaheap::Validation::full);
    if (HasFailure()) return;
  }
  expect_graphs(dump_graph(heap, kIds), live);
  // Without the wait it released after every iteration's compaction (39 of 40), each mapped again.
  EXPECT_GE(releases, 1);
  EXPECT_LE(releases, 5);
  // The population falls and the transient graphs stop: once the heap has not grown for the
  // wait, the policy gives the memory back even though nothing is left to compact.
  heap.parallel_do<Entity, &Entity::collect>(objects.data());
  for (std::size_t graph = 1; graph < live.size(); ++graph)
    heap.launch(live[graph].size(), DestroyRange{heap.view(), objects.data(), live[graph].first_id});
  live.resize(1);
  const std::uint64_t mapped_busy = heap.mapped_block_count();
  long long iteration = kIterations;
  for (const long long until = iteration + 2 * soaheap::ReleaseBackoff::kMaxQuiet; iteration < until; ++iteration) {
    const std::uint64_t mapped = heap.mapped_block_count();
    maybe_defrag(iteration);
    heap.validate(soaheap::Validation::full);
    if (heap.mapped_block_count() < mapped) break;
  }
  EXPECT_GT(moved_by_releases, 0u) << "no release moved an object: the check above saw nothing";
  EXPECT_LT(heap.mapped_block_count(), mapped_busy / 4) << "released at iteration " << iteration;
  expect_graphs(dump_graph(heap, kIds), live);
}

// The auto policy's decisions, driven with synthetic iteration times through AutoController (the
// policy front-end measures these times with the clock and passes them in the same way).

/// Drives one call of the auto policy in which nothing is looked at: its iteration took
/// @p iteration_ms. @return whether the call may run anything (no verdict pending)
bool call_without_look(soaheap::AutoController& controller, long long iteration, double iteration_ms) {
  if (!controller.begin_call(iteration, iteration_ms)) return false;
  controller.end_call(false);
  return true;
}

TEST(AutoController, LearnsAnIntervalFromItsWarmupReorderWhenItPays) {
  // Iterations of 30 ms until the warmup's reorder (7 ms), 2 ms after it: the reorder paid, and even
  // with no loss measured afterwards the controller knows when to reorder next:
  // sqrt(2 * 7 ms * 8 iterations / 28 ms gained) = 2.
  soaheap::AutoController controller(1.0);
  controller.start();
  long long iteration = 1;
  for (; iteration < soaheap::AutoController::kReorderWarmup; ++iteration) {
    ASSERT_TRUE(controller.begin_call(iteration, 30.0));
    EXPECT_FALSE(controller.reorder_due(iteration, 30.0 * iteration)) << "no reorder during the warmup";
    controller.end_call(false);
  }
  ASSERT_TRUE(controller.begin_call(iteration, 30.0));
  ASSERT_TRUE(controller.reorder_due(iteration, 30.0 * iteration)) << "the first reorder comes right after the warmup";
  controller.reordered(iteration, 7.0);
  controller.end_call(false);
  EXPECT_EQ(controller.reorders(), 1);
  EXPECT_EQ(controller.learned_interval(), 0) << "nothing is learned before the reorder is judged";
  EXPECT_FALSE(call_without_look(controller, ++iteration, 2.0)) << "the first iteration after a reorder does not judge it";
  EXPECT_EQ(controller.learned_interval(), 0);
  EXPECT_TRUE(call_without_look(controller, ++iteration, 2.0)) << "the second iteration judges it";
  EXPECT_EQ(controller.learned_interval(), 2);
  EXPECT_EQ(controller.reorder_interval(), 1);
  EXPECT_DOUBLE_EQ(controller.saved_ms(), 7.0) << "a reorder that paid is not charged to the budget";
}

TEST(AutoController, AReorderThatGainedNothingBacksOffAndTheNextComesWhenDisorderCostsAReorder) {
  soaheap::AutoController controller(1.0);
  controller.start();
  long long iteration = 1;
  for (; iteration <= soaheap::AutoController::kReorderWarmup; ++iteration) {
    ASSERT_TRUE(controller.begin_call(iteration, 10.0));
    if (controller.reorder_due(iteration, 1000.0)) controller.reordered(iteration, 5.0);
    controller.end_call(false);
  }
  ASSERT_EQ(controller.reorders(), 1);
  EXPECT_FALSE(call_without_look(controller, iteration++, 10.0));
  EXPECT_TRUE(call_without_look(controller, iteration++, 10.0));  // as slow as before: not paid
  EXPECT_EQ(controller.reorder_interval(), 2) << "the backoff doubles the least interval";
  EXPECT_EQ(controller.learned_interval(), 0);
  EXPECT_DOUBLE_EQ(controller.saved_ms(), 0.0);
  // Iterations of 10, 12 and 14 ms lose 0, 2 and 4 ms to disorder: the reorder (5 ms) is due once
  // the loss reaches it, at the third.
  for (const double iteration_ms : {10.0, 12.0}) {
    ASSERT_TRUE(controller.begin_call(iteration, iteration_ms));
    EXPECT_FALSE(controller.reorder_due(iteration, 1000.0)) << iteration_ms;
    controller.end_call(false);
    ++iteration;
  }
  ASSERT_TRUE(controller.begin_call(iteration, 14.0));
  EXPECT_TRUE(controller.reorder_due(iteration, 1000.0));
}

TEST(AutoController, CompactionsThatMadeTheNextIterationFasterAreNotChargedToTheBudget) {
  // An iteration of 30 ms before the compaction (4 ms, after a look of 0.5 ms), then two of 2 ms:
  // it paid and its cost leaves the budget. Followed by iterations of 60 ms it did not.
  for (const double after_ms : {2.0, 60.0}) {
    SCOPED_TRACE("iterations after the compaction: " + std::to_string(after_ms) + " ms");
    soaheap::AutoController controller(1.0);
    controller.start();
    ASSERT_TRUE(controller.begin_call(1, 30.0));
    ASSERT_TRUE(controller.look_due(1, {"Atom"}, 30.0));
    controller.looked(0.5);
    ASSERT_TRUE(controller.compaction_wanted(1, "Atom", 100, 40)) << "60 of 100 blocks to gain";
    controller.compacted(1, "Atom", 4.0, 60, 60, 34.5);
    controller.end_look(1);
    controller.end_call(false);
    EXPECT_DOUBLE_EQ(controller.spent_ms(), 4.5);
    EXPECT_FALSE(call_without_look(controller, 2, after_ms)) << "nothing runs before the verdict";
    EXPECT_DOUBLE_EQ(controller.saved_ms(), 0.0) << "runs are judged by the second iteration after them";
    EXPECT_TRUE(call_without_look(controller, 3, after_ms));
    if (after_ms < 30) {
      EXPECT_DOUBLE_EQ(controller.saved_ms(), 4.0) << "the look is charged whatever it finds, the run that paid is not";
      EXPECT_TRUE(controller.last_run_paid("Atom"));
    } else {
      EXPECT_DOUBLE_EQ(controller.saved_ms(), 0.0) << "a compaction followed by a slower iteration counted as paid";
      EXPECT_FALSE(controller.last_run_paid("Atom"));
    }
  }
}

TEST(AutoController, AClassWhoseLastCompactionPaidIsCompactedOverTheBudgetUntilOneDoesNot) {
  soaheap::AutoController controller(1e-9);  // nothing fits: only runs exempt from the budget happen
  const std::vector<std::string> classes{"Atom"};
  controller.start();
  // A class never compacted gets its first run whatever the budget says.
  ASSERT_TRUE(controller.begin_call(1, 30.0));
  ASSERT_TRUE(controller.look_due(1, classes, 30.0));
  controller.looked(0.5);
  ASSERT_TRUE(controller.compaction_wanted(1, "Atom", 100, 40));
  controller.compacted(1, "Atom", 4.0, 60, 60, 34.5);
  controller.end_look(1);
  controller.end_call(false);
  EXPECT_FALSE(call_without_look(controller, 2, 2.0));
  ASSERT_TRUE(controller.begin_call(3, 2.0));
  ASSERT_TRUE(controller.last_run_paid("Atom")) << "the run made the iterations 15 times faster";
  ASSERT_TRUE(controller.look_due(3, classes, 40.0)) << "a class whose last run paid may run: look";
  controller.looked(0.5);
  EXPECT_FALSE(controller.compaction_wanted(3, "Atom", 40, 40)) << "nothing to gain";
  controller.end_look(3);
  controller.end_call(false);
  // That look found nothing: the next one two iterations later.
  ASSERT_TRUE(controller.begin_call(4, 2.0));
  EXPECT_FALSE(controller.look_due(4, classes, 42.0));
  controller.end_call(false);
  ASSERT_TRUE(controller.begin_call(5, 2.0));
  ASSERT_TRUE(controller.look_due(5, classes, 44.0));
  controller.looked(0.5);
  ASSERT_TRUE(controller.compaction_wanted(5, "Atom", 100, 40)) << "its last run paid: the budget does not stop the next";
  controller.compacted(5, "Atom", 4.0, 60, 60, 48.5);
  controller.end_look(5);
  controller.end_call(false);
  // Iterations far slower than the one before the run: it did not pay.
  EXPECT_FALSE(call_without_look(controller, 6, 90.0));
  ASSERT_TRUE(controller.begin_call(7, 90.0));
  EXPECT_FALSE(controller.last_run_paid("Atom"));
  EXPECT_FALSE(controller.look_due(7, classes, 230.0)) << "a run that did not pay let the next look over the budget";
  controller.end_call(false);
  EXPECT_GT(controller.spent_ms() - controller.saved_ms(), 1e-9 * 230.0);
}

TEST(AutoController, LooksThatFindNothingComeLessAndLessOften) {
  soaheap::AutoController controller(1.0);
  controller.start();
  std::vector<long long> looks;
  for (long long iteration = 1; iteration <= 300; ++iteration) {
    ASSERT_TRUE(controller.begin_call(iteration, 1.0));
    if (controller.look_due(iteration, {"Atom"}, static_cast<double>(iteration))) {
      looks.push_back(iteration);
      controller.looked(0.0);
      EXPECT_FALSE(controller.compaction_wanted(iteration, "Atom", 100, 95)) << "5 of 100 blocks is below 1/16";
      controller.end_look(iteration);
    }
    controller.end_call(false);
  }
  // Intervals 2, 4, ... up to kMaxLookInterval (64).
  EXPECT_EQ(looks, (std::vector<long long>{1, 3, 7, 15, 31, 63, 127, 191, 255}));
}

/// One call of the auto policy at @p iteration (the iteration before it took 10 ms) that compacts
/// Atom (2 ms) and then gives memory back (3 ms).
void compact_and_release(soaheap::AutoController& controller, long long iteration, double elapsed_ms) {
  ASSERT_TRUE(controller.begin_call(iteration, 10.0));
  ASSERT_TRUE(controller.look_due(iteration, {"Atom"}, elapsed_ms));
  controller.looked(0.0);
  ASSERT_TRUE(controller.compaction_wanted(iteration, "Atom", 100, 50));
  controller.compacted(iteration, "Atom", 2.0, 50, 50, elapsed_ms);
  controller.released_memory(3.0, true);
  controller.end_look(iteration);
  controller.end_call(false);
}

TEST(AutoController, GivingMemoryBackIsChargedWithTheRunsItFollowed) {
  soaheap::AutoController controller(1.0);
  controller.start();
  ASSERT_NO_FATAL_FAILURE(compact_and_release(controller, 1, 10.0));
  EXPECT_DOUBLE_EQ(controller.spent_ms(), 5.0);
  // The iterations after it are no faster: not paid, and nothing of the 5 ms is saved.
  ASSERT_FALSE(controller.begin_call(2, 10.0));
  ASSERT_TRUE(controller.begin_call(3, 10.0));
  EXPECT_DOUBLE_EQ(controller.saved_ms(), 0.0);
  EXPECT_FALSE(controller.last_run_paid("Atom"));
  controller.end_call(false);
  // Runs (with their release) that made the second iteration after them faster: all 5 ms saved.
  ASSERT_NO_FATAL_FAILURE(compact_and_release(controller, 4, 1000.0));
  ASSERT_FALSE(controller.begin_call(5, 10.0));
  ASSERT_TRUE(controller.begin_call(6, 5.0));
  EXPECT_DOUBLE_EQ(controller.saved_ms(), 5.0);
}

TEST(AutoController, GivingMemoryBackWaitsForTheBudgetItsLastCostNeeds) {
  soaheap::AutoController controller(0.02);
  controller.start();
  EXPECT_TRUE(controller.release_fits(0.0)) << "the first release counts as free";
  controller.released_memory(0.5, false);  // a look that released nothing teaches no cost
  EXPECT_FALSE(controller.release_fits(10.0)) << "0.5 ms spent against 0.2 ms of budget";
  EXPECT_TRUE(controller.release_fits(25.0));
  controller.released_memory(10.0, true);
  EXPECT_FALSE(controller.release_fits(500.0)) << "10.5 ms spent and 10 ms expected against 10 ms";
  EXPECT_TRUE(controller.release_fits(1025.0));
  EXPECT_DOUBLE_EQ(controller.spent_ms(), 10.5);
}

TEST(ReleaseBackoff, WaitsUntilTheHeapStopsGrowing) {
  soaheap::ReleaseBackoff backoff;
  backoff.observe(0, 100);
  EXPECT_FALSE(backoff.due(0));
  backoff.observe(1, 100);
  EXPECT_FALSE(backoff.due(1));
  backoff.observe(2, 100);
  EXPECT_TRUE(backoff.due(2)) << "two iterations without growth (kMinQuiet)";
  backoff.observe(3, 150);
  EXPECT_FALSE(backoff.due(3)) << "grew at 3";
  backoff.observe(4, 150);
  EXPECT_FALSE(backoff.due(4));
  backoff.observe(5, 140);  // fewer blocks (someone trimmed): not growth
  EXPECT_TRUE(backoff.due(5));
}

TEST(ReleaseBackoff, AReleaseMappedAgainSoonDoublesTheWaitAndOneThatHoldsHalvesIt) {
  soaheap::ReleaseBackoff backoff;
  long long iteration = 0;
  // A heap that needs 200 blocks within each iteration but keeps 100 between them: every release
  // is mapped again at the next call.
  std::vector<long long> releases;
  for (; iteration < 200; ++iteration) {
    backoff.observe(iteration, 200);
    if (backoff.due(iteration)) {
      releases.push_back(iteration);
      backoff.released(iteration, 100);
      backoff.observe(++iteration, 200);  // the next iteration maps it again
    }
  }
  // Each premature release doubles the wait, counted from the regrowth: 4, 8, 16, 32, 64.
  EXPECT_EQ(releases, (std::vector<long long>{2, 7, 16, 33, 66, 131}));
  EXPECT_EQ(backoff.quiet(), 128);
  // A release the heap lives with: after `quiet` calls without growth the wait halves.
  for (; !backoff.due(iteration); ++iteration) backoff.observe(iteration, 200);
  backoff.released(iteration, 100);
  for (long long until = iteration + 128; iteration <= until; ++iteration) backoff.observe(iteration, 100);
  EXPECT_EQ(backoff.quiet(), 64);
  // Never above kMaxQuiet, never below kMinQuiet.
  for (int round = 0; round < 20; ++round) {
    backoff.released(iteration, 100);
    backoff.observe(++iteration, 200);
  }
  EXPECT_EQ(backoff.quiet(), soaheap::ReleaseBackoff::kMaxQuiet);
  for (int round = 0; round < 20; ++round) {
    backoff.released(iteration, 100);
    iteration += backoff.quiet();
    backoff.observe(iteration, 100);
  }
  EXPECT_EQ(backoff.quiet(), soaheap::ReleaseBackoff::kMinQuiet);
}

TEST(DefragPolicyOrders, AutoLearnsTheReorderIntervalThatCostsLeast) {
  using Policy = soaheap::DefragPolicy;
  // A reorder of 2 ms that made the iteration 0.2 ms faster after 50 iterations: the loss grows by
  // 0.004 ms per iteration, so every sqrt(2 * 2 / 0.004) = 31.6 iterations costs least.
  EXPECT_EQ(Policy::learned_reorder_interval(2.0, 50, 0.2), 32);
  // Four times the gain: half the interval.
  EXPECT_EQ(Policy::learned_reorder_interval(2.0, 50, 0.8), 16);
  // Disorder that costs much more than a reorder: every iteration, never less.
  EXPECT_EQ(Policy::learned_reorder_interval(0.001, 1, 100.0), 1);
  // A tiny gain: at most the backoff's longest interval.
  EXPECT_EQ(Policy::learned_reorder_interval(5.0, 1000, 1e-9), Policy::kAutoMaxReorderInterval);
  // Nothing to learn from no gain, no iterations or a bad cost.
  EXPECT_EQ(Policy::learned_reorder_interval(2.0, 50, 0.0), 0);
  EXPECT_EQ(Policy::learned_reorder_interval(2.0, 50, -0.1), 0);
  EXPECT_EQ(Policy::learned_reorder_interval(2.0, 0, 0.2), 0);
  EXPECT_EQ(Policy::learned_reorder_interval(std::nan(""), 50, 0.2), 0);
}

}  // namespace soaheap_test
