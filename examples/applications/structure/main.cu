// Structure: fracture of a spring-node mesh (a 2D finite-element-like material). The left column
// is anchored, the right column is pulled to the right; springs that are stretched beyond their
// (randomly varying) breaking strain break and are destroyed. Every few iterations a breadth-first
// search from the anchors marks the nodes still connected to one; detached fragments (nodes and
// their springs) are destroyed. Objects are allocated up front and only deallocated afterwards.
//
// Self-check after every BFS (on meshes up to kCheckEveryBfsMaxNodes nodes; at the end otherwise):
// every remaining node is reachable from an anchor, every spring's endpoints are alive, and each
// node's spring slots hold exactly the springs that name it.

#include "examples/common/app.cuh"
#include "examples/common/counter_hash.cuh"

#include <soaheap/soaheap.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

namespace structure {

constexpr int kMaxSprings = 6;  // right, down, down-right and their opposites: a triangular lattice
/// The slot of a spring at its other endpoint: right <-> left, down <-> up, down-right <-> up-left.
SOAHEAP_HD constexpr int opposite_slot(int slot) { return (slot + kMaxSprings / 2) % kMaxSprings; }

struct Physics {
  float time_step = 0.05f;
  float damping = 0.98f;
  float stiffness = 20.0f;
  float mass = 1.0f;
  float pull_speed = 0.5f;           ///< of the right column, units per time
  float breaking_strain = 0.12f;     ///< mean; each spring varies by +-40 %
  float prestrain = 0.12f;           ///< the mesh starts stretched by this much in both directions
  std::uint32_t hole_per_mille = 30; ///< lattice sites without a node
  std::uint32_t missing_spring_per_mille = 50;
};

using soaheap_app::splitmix_hash3;

class Spring;

class NodeBase : public soaheap::Object<NodeBase> {
 public:
  using FieldTypes =
      soaheap::fields<float, float, soaheap::array<Spring*, kMaxSprings>, std::uint64_t, std::uint32_t>;
  static constexpr const char* kName = "NodeBase";
  static constexpr bool kAbstract = true;
  soaheap::Field<NodeBase, 0> x;
  soaheap::Field<NodeBase, 1> y;
  soaheap::Field<NodeBase, 2> springs;
  soaheap::Field<NodeBase, 3> reached;  ///< BFS mark (atomic): 1 when connected to an anchor
  soaheap::Field<NodeBase, 4> id;       ///< lattice index (readable in host snapshots)

  SOAHEAP_HD NodeBase(std::uint32_t new_id, float new_x, float new_y) {
    x = new_x;
    y = new_y;
    for (int s = 0; s < kMaxSprings; ++s) springs[s] = nullptr;
    reached = 0;
    id = new_id;
  }
  SOAHEAP_HD std::uint64_t* reached_address() { return &static_cast<std::uint64_t&>(reached); }

  template <class View>
  SOAHEAP_HD void reset_reached(const View&);
  template <class View>
  SOAHEAP_HD void propagate(const View&, std::uint64_t* changed);
  template <class View>
  SOAHEAP_HD void remove_if_detached(const View& heap, std::uint64_t* removed);
};

class Spring : public soaheap::Object<Spring> {
 public:
  using FieldTypes = soaheap::fields<NodeBase*, NodeBase*, float, float, float, float, std::uint32_t, std::uint32_t,
                                     std::uint8_t, std::uint8_t>;
  static constexpr const char* kName = "Spring";
  soaheap::Field<Spring, 0> a;
  soaheap::Field<Spring, 1> b;
  soaheap::Field<Spring, 2> force_x;  ///< force on `a` (b gets the opposite)
  soaheap::Field<Spring, 3> force_y;
  soaheap::Field<Spring, 4> rest_length;
  soaheap::Field<Spring, 5> breaking_strain;
  soaheap::Field<Spring, 6> id_a;
  soaheap::Field<Spring, 7> id_b;
  soaheap::Field<Spring, 8> slot_a;  ///< index of this spring in a->springs
  soaheap::Field<Spring, 9> slot_b;

  SOAHEAP_HD Spring(NodeBase* node_a, NodeBase* node_b, int slot_in_a, float rest, float strain_limit) {
    a = node_a;
    b = node_b;
    force_x = 0.0f;
    force_y = 0.0f;
    rest_length = rest;
    breaking_strain = strain_limit;
    id_a = node_a->id;
    id_b = node_b->id;
    slot_a = static_cast<std::uint8_t>(slot_in_a);
    slot_b = static_cast<std::uint8_t>(opposite_slot(slot_in_a));
    node_a->springs[slot_in_a] = this;
    node_b->springs[opposite_slot(slot_in_a)] = this;
  }

  /// Computes the spring force, or breaks (unlinks and destroys) the spring when overstretched.
  template <class View>
  SOAHEAP_HD void compute_force(const View& heap, float stiffness, std::uint64_t* broken) {
    NodeBase* node_a = a;
    NodeBase* node_b = b;
    const float dx = static_cast<float>(node_b->x) - static_cast<float>(node_a->x);
    const float dy = static_cast<float>(node_b->y) - static_cast<float>(node_a->y);
    const float length = sqrtf(dx * dx + dy * dy);
    const float rest = rest_length;
    if ((length - rest) / rest > static_cast<float>(breaking_strain)) {
      node_a->springs[static_cast<std::uint8_t>(slot_a)] = nullptr;
      node_b->springs[static_cast<std::uint8_t>(slot_b)] = nullptr;
      soaheap::destroy(heap, this);
      soaheap::detail::atomic_fetch_add(broken, 1);
      return;
    }
    const float tension = length > 0.0f ? stiffness * (length - rest) / length : 0.0f;
    force_x = tension * dx;
    force_y = tension * dy;
  }

  template <class View>
  SOAHEAP_HD void remove_if_detached(const View& heap, std::uint64_t* removed) {
    NodeBase* node_a = a;
    if (soaheap::detail::atomic_load(node_a->reached_address()) != 0) return;
    soaheap::destroy(heap, this);  // its nodes are unreachable too and are destroyed next
    soaheap::detail::atomic_fetch_add(removed, 1);
  }
};

class Node : public soaheap::Object<Node, NodeBase> {
 public:
  using FieldTypes = soaheap::fields<float, float, float>;
  static constexpr const char* kName = "Node";
  soaheap::Field<Node, 0> velocity_x;
  soaheap::Field<Node, 1> velocity_y;
  soaheap::Field<Node, 2> mass;

  SOAHEAP_HD Node(std::uint32_t new_id, float new_x, float new_y, float new_mass) : Object(new_id, new_x, new_y) {
    velocity_x = 0.0f;
    velocity_y = 0.0f;
    mass = new_mass;
  }

  /// Semi-implicit Euler step under the forces of its springs (summed in slot order).
  SOAHEAP_HD void move(float time_step, float damping) {
    float fx = 0.0f, fy = 0.0f;
    NodeBase* self = this;
    for (int s = 0; s < kMaxSprings; ++s) {
      Spring* spring = springs[s];
      if (spring == nullptr) continue;
      const float sign = static_cast<NodeBase*>(spring->a) == self ? 1.0f : -1.0f;
      fx += sign * static_cast<float>(spring->force_x);
      fy += sign * static_cast<float>(spring->force_y);
    }
    const float m = mass;
    const float vx = (static_cast<float>(velocity_x) + fx / m * time_step) * damping;
    const float vy = (static_cast<float>(velocity_y) + fy / m * time_step) * damping;
    velocity_x = vx;
    velocity_y = vy;
    x += vx * time_step;
    y += vy * time_step;
  }
};

/// Fixed in place.
class AnchorNode : public soaheap::Object<AnchorNode, NodeBase> {
 public:
  using FieldTypes = soaheap::fields<>;
  static constexpr const char* kName = "AnchorNode";
  SOAHEAP_HD AnchorNode(std::uint32_t new_id, float new_x, float new_y) : Object(new_id, new_x, new_y) {}
};

/// An anchor that is pulled at constant velocity.
class AnchorPullNode : public soaheap::Object<AnchorPullNode, NodeBase> {
 public:
  using FieldTypes = soaheap::fields<float, float>;
  static constexpr const char* kName = "AnchorPullNode";
  soaheap::Field<AnchorPullNode, 0> pull_x;
  soaheap::Field<AnchorPullNode, 1> pull_y;

  SOAHEAP_HD AnchorPullNode(std::uint32_t new_id, float new_x, float new_y, float velocity_x, float velocity_y)
      : Object(new_id, new_x, new_y) {
    pull_x = velocity_x;
    pull_y = velocity_y;
  }
  SOAHEAP_HD void pull(float time_step) {
    x += static_cast<float>(pull_x) * time_step;
    y += static_cast<float>(pull_y) * time_step;
  }
};

using StructureHeap = soaheap::Heap<NodeBase, Node, AnchorNode, AnchorPullNode, Spring>;
using View = StructureHeap::View;

template <class T, class Pointer>
SOAHEAP_HD bool is_a(Pointer* object) {
  return soaheap::detail::class_id_of(soaheap::detail::object_bits_of(object)) == View::template class_id<T>;
}

template <class ViewType>
SOAHEAP_HD void NodeBase::reset_reached(const ViewType&) {
  NodeBase* self = this;
  const bool anchor = is_a<AnchorNode>(self) || is_a<AnchorPullNode>(self);
  soaheap::detail::atomic_store(reached_address(), anchor ? 1 : 0);
}

/// Marks the neighbours of a reached node. A thread that newly marks a node goes on from it
/// depth-first (up to kPropagationStack pending nodes), so one pass usually covers long paths and
/// the host loop needs few passes; the reached set does not depend on how passes interleave.
constexpr int kPropagationStack = 32;

template <class ViewType>
SOAHEAP_HD void NodeBase::propagate(const ViewType&, std::uint64_t* changed) {
  if (soaheap::detail::atomic_load(reached_address()) == 0) return;
  NodeBase* pending[kPropagationStack];
  int depth = 0;
  pending[depth++] = this;
  std::uint64_t newly_reached = 0;
  while (depth > 0) {
    NodeBase* node = pending[--depth];
    for (int s = 0; s < kMaxSprings; ++s) {
      Spring* spring = node->springs[s];
      if (spring == nullptr) continue;
      NodeBase* other = static_cast<NodeBase*>(spring->a) == node ? static_cast<NodeBase*>(spring->b)
                                                                   : static_cast<NodeBase*>(spring->a);
      std::uint64_t* mark = other->reached_address();
      if (soaheap::detail::atomic_load(mark) == 0 && soaheap::detail::atomic_cas(mark, 0, 1) == 0) {
        ++newly_reached;
        if (depth < kPropagationStack) pending[depth++] = other;
      }
    }
  }
  if (newly_reached != 0) soaheap::detail::atomic_fetch_add(changed, newly_reached);
}

template <class ViewType>
SOAHEAP_HD void NodeBase::remove_if_detached(const ViewType& heap, std::uint64_t* removed) {
  if (soaheap::detail::atomic_load(reached_address()) != 0) return;
  soaheap::destroy(heap, this);
  soaheap::detail::atomic_fetch_add(removed, 1);
}

// ---- mesh generation -------------------------------------------------------------------------------

enum Salt : std::uint64_t { kSaltHole = 1, kSaltSpring = 2, kSaltStrain = 3 };

struct Mesh {
  std::uint32_t width, height;
  std::uint64_t seed;
  Physics physics;

  SOAHEAP_HD bool has_node(std::uint32_t col, std::uint32_t row) const {
    if (col == 0 || col + 1 == width) return true;  // anchor columns are complete
    return splitmix_hash3(seed, kSaltHole, std::uint64_t{row} * width + col) % 1000 >= physics.hole_per_mille;
  }
};

struct CreateNodes {
  View heap;
  Mesh mesh;
  NodeBase** nodes;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    const std::uint32_t col = static_cast<std::uint32_t>(i % mesh.width), row = static_cast<std::uint32_t>(i / mesh.width);
    NodeBase* node = nullptr;
    const float spacing = 1.0f + mesh.physics.prestrain;
    const float px = static_cast<float>(col) * spacing, py = static_cast<float>(row) * spacing;
    const std::uint32_t id = static_cast<std::uint32_t>(i);
    if (mesh.has_node(col, row)) {
      if (col == 0) node = new (heap) AnchorNode(id, px, py);
      else if (col + 1 == mesh.width) node = new (heap) AnchorPullNode(id, px, py, mesh.physics.pull_speed, 0.0f);
      else node = new (heap) Node(id, px, py, mesh.physics.mass);
    }
    nodes[i] = node;
  }
};

/// Node i creates its springs to the right, down and down-right neighbours (slots 0, 1, 2).
struct CreateSprings {
  View heap;
  Mesh mesh;
  NodeBase** nodes;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    NodeBase* node = nodes[i];
    if (node == nullptr) return;
    const std::uint32_t col = static_cast<std::uint32_t>(i % mesh.width), row = static_cast<std::uint32_t>(i / mesh.width);
    const int dcol[3] = {1, 0, 1}, drow[3] = {0, 1, 1};
    for (int direction = 0; direction < 3; ++direction) {
      const std::uint32_t c = col + static_cast<std::uint32_t>(dcol[direction]);
      const std::uint32_t r = row + static_cast<std::uint32_t>(drow[direction]);
      if (c >= mesh.width || r >= mesh.height) continue;
      NodeBase* other = nodes[std::uint64_t{r} * mesh.width + c];
      if (other == nullptr) continue;
      const std::uint64_t key = i * 3 + static_cast<std::uint64_t>(direction);
      if (splitmix_hash3(mesh.seed, kSaltSpring, key) % 1000 < mesh.physics.missing_spring_per_mille) continue;
      const float variation = 0.6f + 0.8f * static_cast<float>(splitmix_hash3(mesh.seed, kSaltStrain, key) % 10000) / 10000.0f;
      const float rest = direction == 2 ? 1.41421356f : 1.0f;  // lattice spacing 1
      new (heap) Spring(node, other, direction, rest, mesh.physics.breaking_strain * variation);
    }
  }
};

/// The order of nodes: their lattice index (row-major, as the baseline's arrays).
struct NodeByIndex {
  template <class C>
  SOAHEAP_HD std::uint32_t operator()(const C* node) const {
    return node->id;
  }
};

// ---- host-side invariants ----------------------------------------------------------------------------

/// Every spring's endpoints alive, node slots consistent with springs, every node reachable from
/// an anchor. Returns the number of violations (and prints the first few).
std::uint64_t check_connectivity(const StructureHeap& heap) {
  struct NodeInfo {
    bool anchor;
    int linked_slots;
    int named_by_springs = 0;
    bool reached = false;
  };
  std::unordered_map<std::uint32_t, NodeInfo> nodes;
  std::uint64_t violations = 0;
  const auto report = [&](const char* what, std::uint32_t id) {
    if (violations < 5) std::fprintf(stderr, "structure self-check: %s (node %u)\n", what, id);
    ++violations;
  };
  const auto add_node = [&](const NodeBase* node, bool anchor) {
    int linked = 0;
    for (int s = 0; s < kMaxSprings; ++s) linked += static_cast<Spring*>(node->springs[s]) != nullptr ? 1 : 0;
    const std::uint32_t id = node->id;
    if (!nodes.emplace(id, NodeInfo{anchor, linked}).second) report("two nodes with one id", id);
  };
  heap.for_each<Node>([&](const Node* node) { add_node(node, false); });
  heap.for_each<AnchorNode>([&](const AnchorNode* node) { add_node(node, true); });
  heap.for_each<AnchorPullNode>([&](const AnchorPullNode* node) { add_node(node, true); });
  std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> adjacency;
  heap.for_each<Spring>([&](const Spring* spring) {
    const std::uint32_t a = spring->id_a, b = spring->id_b;
    const auto ia = nodes.find(a), ib = nodes.find(b);
    if (ia == nodes.end() || ib == nodes.end()) {
      report("spring endpoint is not alive", ia == nodes.end() ? a : b);
      return;
    }
    ia->second.named_by_springs += 1;
    ib->second.named_by_springs += 1;
    adjacency[a].push_back(b);
    adjacency[b].push_back(a);
  });
  std::queue<std::uint32_t> frontier;
  for (auto& [id, info] : nodes) {
    if (info.linked_slots != info.named_by_springs) report("spring slots disagree with the springs", id);
    if (info.anchor) {
      info.reached = true;
      frontier.push(id);
    }
  }
  while (!frontier.empty()) {
    const std::uint32_t id = frontier.front();
    frontier.pop();
    for (const std::uint32_t other : adjacency[id]) {
      NodeInfo& info = nodes[other];
      if (!info.reached) {
        info.reached = true;
        frontier.push(other);
      }
    }
  }
  for (const auto& [id, info] : nodes)
    if (!info.reached) report("node not reachable from an anchor", id);
  return violations;
}

}  // namespace structure

namespace {

using structure::StructureHeap;
using structure::View;

/// Meshes up to this many lattice sites are checked after every BFS; larger ones at the end.
constexpr std::uint64_t kCheckEveryBfsMaxNodes = 1u << 16;
enum Counter { kBroken, kRemovedNodes, kRemovedSprings, kChanged, kCounters };

int run_app(int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli("Structure: fracture of a pulled spring-node mesh; a BFS from the anchors removes detached fragments", soaheap_app::AppDefaults{48, 512, 300, 5000});
  structure::Physics physics;
  int bfs_interval = 10;
  cli.option("--bfs-interval", bfs_interval, "Run the BFS (and remove detached fragments) every this many iterations", 1,
             1 << 30);
  std::string setup_order = "lattice";
  cli.choice("--setup-order", setup_order,
             "After building the mesh: 'lattice' sorts nodes by lattice index and springs by their first node "
             "(ordered compaction), 'none' keeps the order the allocator gave them",
             {"lattice", "none"});
  cli.option("--pull-speed", physics.pull_speed, "Speed of the pulled right column");
  cli.option("--prestrain", physics.prestrain, "Initial stretch of the mesh (both directions)");
  cli.option("--breaking-strain", physics.breaking_strain, "Mean strain at which a spring breaks");
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions options = cli.options();

  // --size is the mesh width; the mesh is size x size lattice sites.
  const std::uint32_t side = static_cast<std::uint32_t>(std::max<std::uint64_t>(options.size, 2));
  const structure::Mesh mesh{side, side, options.seed, physics};
  const std::uint64_t sites = std::uint64_t{side} * side;

  soaheap::HeapOptions heap_options;
  heap_options.objects = sites * 10 + 64 * 64 * 4;  // about 3 springs per node, room for partly filled blocks
  heap_options.backend = options.backend;
  StructureHeap heap(soaheap_app::heap_options_for(heap_options, options));
  soaheap_app::AppRun<StructureHeap> run("structure", options, heap);

  soaheap::detail::Memory counters(options.backend, kCounters * sizeof(std::uint64_t));
  counters.fill_zero();
  std::uint64_t* counter = counters.as<std::uint64_t>();
  {
    soaheap::detail::Memory nodes(options.backend, sites * sizeof(structure::NodeBase*));
    heap.launch(sites, structure::CreateNodes{heap.view(), mesh, nodes.as<structure::NodeBase*>()});
    heap.launch(sites, structure::CreateSprings{heap.view(), mesh, nodes.as<structure::NodeBase*>()});
  }
  // Springs, and nodes next to lattice holes, are created by diverged warps, one lane at a time:
  // their blocks end up about half full and out of lattice order, so every method runs twice the
  // threads and a spring's nodes (a node's springs) lie far apart. Sorting both once, as a user does
  // after building a mesh, gives full blocks with neighbours side by side. Part of the timed setup.
  // The half-full blocks can fill the heap (the GPU's 512² mesh: 41,216 of 41,688 blocks), and an
  // ordered run gathers into free blocks, so both classes are first compacted in place.
  if (setup_order == "lattice") {
    soaheap::DefragOptions in_place;
    in_place.target = soaheap::DefragTarget::minimum;
    soaheap::defragment<structure::Spring>(heap, in_place);
    soaheap::defragment<structure::NodeBase>(heap, in_place);
    const soaheap::DefragOptions in_order;
    soaheap::defragment<structure::NodeBase>(heap, in_order, soaheap::order_by_key<32>(structure::NodeByIndex{}));
    soaheap::defragment<structure::Spring>(heap, in_order, soaheap::order_by_pointer_field<&structure::Spring::a>());
  }
  const std::uint64_t initial_springs = heap.count<structure::Spring>();
  const View view = heap.view();
  const bool check_every_bfs = sites <= kCheckEveryBfsMaxNodes;
  std::uint64_t violations = 0, bfs_runs = 0;
  const auto read_counter = [&](int which) {
    std::uint64_t value = 0;
    counters.copy_to_host(&value, which * sizeof(std::uint64_t), sizeof(value));
    return value;
  };

  const auto bfs_and_remove = [&] {
    heap.parallel_do<structure::NodeBase, &structure::NodeBase::reset_reached<View>>(view);
    // Repeat until no new node is reached; the reached set is the same however the passes interleave.
    for (;;) {
      const std::uint64_t zero = 0;
      counters.copy_from_host(kChanged * sizeof(std::uint64_t), &zero, sizeof(zero));
      heap.parallel_do<structure::NodeBase, &structure::NodeBase::propagate<View>>(view, counter + kChanged);
      if (read_counter(kChanged) == 0) break;
    }
    heap.parallel_do<structure::Spring, &structure::Spring::remove_if_detached<View>>(view, counter + kRemovedSprings);
    heap.parallel_do<structure::NodeBase, &structure::NodeBase::remove_if_detached<View>>(view, counter + kRemovedNodes);
    ++bfs_runs;
    if (check_every_bfs) violations += structure::check_connectivity(heap);
  };

  for (int it = 0; it < options.iterations; ++it) {
    heap.parallel_do<structure::Spring, &structure::Spring::compute_force<View>>(view, physics.stiffness, counter + kBroken);
    heap.parallel_do<structure::Node, &structure::Node::move>(physics.time_step, physics.damping);
    heap.parallel_do<structure::AnchorPullNode, &structure::AnchorPullNode::pull>(physics.time_step);
    if ((it + 1) % bfs_interval == 0) bfs_and_remove();
    run.after_iteration(it);
  }
  bfs_and_remove();
  run.stop_clock();
  if (!check_every_bfs) violations += structure::check_connectivity(heap);
  heap.validate();  // throws (exit code 2) when a heap invariant or a pointer field is broken

  soaheap_app::Result extra;
  extra["mesh"] = {side, side};
  extra["setup_order"] = setup_order;
  extra["initial_springs"] = initial_springs;
  extra["broken_springs"] = read_counter(kBroken);
  extra["removed_nodes"] = read_counter(kRemovedNodes);
  extra["removed_springs"] = read_counter(kRemovedSprings);
  extra["bfs_runs"] = bfs_runs;
  extra["self_check_violations"] = violations;
  return run.finish(violations == 0, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("structure", [&] { return run_app(argc, argv); });
}
