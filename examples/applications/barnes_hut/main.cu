// Barnes-Hut: 2D gravity with a quad tree of dynamically allocated TreeNode objects (DynaSOAr
// paper, Section 6, category 4). Every step destroys the old tree and builds a new one level by
// level: bodies count themselves into the node they are in, nodes holding more than one body
// allocate four children, bodies descend. Node masses are summed bottom-up in 64-bit fixed point
// (exact, order-independent), forces use the opening criterion size/distance < theta.
// Self-check: tree invariants after a final rebuild — each body in exactly one leaf whose box
// contains it, node mass equal to the sum of its children's (or its bodies'), child boxes nested.

#include "examples/common/app.cuh"
#include "examples/common/counter_hash.cuh"

#include <soaheap/soaheap.cuh>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace barnes_hut {

constexpr int kChildren = 4;
constexpr int kMaxDepth = 24;
constexpr int kStackSize = 3 * kMaxDepth + 8;
constexpr double kFixedScale = 1099511627776.0;  ///< 2^40
constexpr float kWorldHalf = 4.0f;               ///< the root box is [-4, 4]^2; walls reflect bodies

using soaheap_app::hash3;
using soaheap_app::uniform_float;
SOAHEAP_HD inline std::uint64_t to_fixed(double value) {
  return static_cast<std::uint64_t>(static_cast<long long>(value * kFixedScale));
}
SOAHEAP_HD inline double from_fixed(std::uint64_t value) { return static_cast<double>(static_cast<long long>(value)) / kFixedScale; }

struct Parameters {
  float theta = 0.5f;
  float time_step = 1e-3f;
  float softening = 0.02f;
  float gravity = 1.0f;
};

class TreeNode : public soaheap::Object<TreeNode> {
 public:
  using FieldTypes = soaheap::fields<soaheap::array<TreeNode*, kChildren>, float, float, float, int, std::uint64_t,
                                     std::uint64_t, std::uint64_t, std::uint64_t, std::uint32_t, std::uint32_t>;
  static constexpr const char* kName = "TreeNode";
  soaheap::Field<TreeNode, 0> children;
  soaheap::Field<TreeNode, 1> center_x;
  soaheap::Field<TreeNode, 2> center_y;
  soaheap::Field<TreeNode, 3> half;       ///< half the side of the node's square
  soaheap::Field<TreeNode, 4> depth;
  soaheap::Field<TreeNode, 5> count;      ///< bodies inside
  soaheap::Field<TreeNode, 6> mass;       ///< fixed point
  soaheap::Field<TreeNode, 7> moment_x;   ///< Σ m·x, fixed point
  soaheap::Field<TreeNode, 8> moment_y;
  soaheap::Field<TreeNode, 9> id;         ///< for the host-side check (pointers are not portable there)
  soaheap::Field<TreeNode, 10> parent_id;

  SOAHEAP_HD TreeNode(float x, float y, float new_half, int new_depth, std::uint32_t new_id, std::uint32_t parent) {
    for (int k = 0; k < kChildren; ++k) children[k] = nullptr;
    center_x = x;
    center_y = y;
    half = new_half;
    depth = new_depth;
    count = 0;
    mass = 0;
    moment_x = 0;
    moment_y = 0;
    id = new_id;
    parent_id = parent;
  }

  SOAHEAP_HD bool is_leaf() const { return static_cast<TreeNode*>(children[0]) == nullptr; }

  SOAHEAP_HD int quadrant(float x, float y) const {
    return (x >= static_cast<float>(center_x) ? 1 : 0) + (y >= static_cast<float>(center_y) ? 2 : 0);
  }

  /// Nodes of @p level holding more than one body get four children.
  template <class View>
  SOAHEAP_HD void split(const View& heap, int level, std::uint64_t* next_id) {
    if (depth != level || count < 2 || depth >= kMaxDepth) return;
    const float quarter = 0.5f * static_cast<float>(half);
    for (int k = 0; k < kChildren; ++k) {
      const float x = center_x + ((k & 1) ? quarter : -quarter);
      const float y = center_y + ((k & 2) ? quarter : -quarter);
      const auto new_id = static_cast<std::uint32_t>(soaheap::detail::atomic_fetch_add(next_id, 1));
      children[k] = new (heap) TreeNode(x, y, quarter, depth + 1, new_id, id);
    }
  }

  /// Sums the children's mass and moments (exact integer sums).
  SOAHEAP_HD void summarize(int level) {
    if (depth != level || is_leaf()) return;
    std::uint64_t m = 0, mx = 0, my = 0;
    for (int k = 0; k < kChildren; ++k) {
      TreeNode* child = children[k];
      m += child->mass;
      mx += child->moment_x;
      my += child->moment_y;
    }
    mass = m;
    moment_x = mx;
    moment_y = my;
  }

  template <class View>
  SOAHEAP_HD void remove(const View& heap) {
    soaheap::destroy(heap, this);
  }
};

class Body : public soaheap::Object<Body> {
 public:
  using FieldTypes = soaheap::fields<TreeNode*, float, float, float, float, float, float, float, int, std::uint32_t>;
  static constexpr const char* kName = "Body";
  soaheap::Field<Body, 0> node;  ///< while building: the node it is in; afterwards its leaf
  soaheap::Field<Body, 1> pos_x;
  soaheap::Field<Body, 2> pos_y;
  soaheap::Field<Body, 3> vel_x;
  soaheap::Field<Body, 4> vel_y;
  soaheap::Field<Body, 5> mass;
  soaheap::Field<Body, 6> force_x;
  soaheap::Field<Body, 7> force_y;
  soaheap::Field<Body, 8> settled;
  soaheap::Field<Body, 9> leaf_id;

  SOAHEAP_HD Body(std::uint64_t index, std::uint64_t seed) {
    const float radius = sqrtf(uniform_float(seed, 0, index));
    const float angle = 6.2831853f * uniform_float(seed, 1, index);
    pos_x = radius * cosf(angle);
    pos_y = radius * sinf(angle);
    vel_x = -0.3f * radius * sinf(angle);
    vel_y = 0.3f * radius * cosf(angle);
    mass = 0.5f + uniform_float(seed, 2, index);
    force_x = 0;
    force_y = 0;
    node = nullptr;
    settled = 0;
    leaf_id = 0;
  }

  SOAHEAP_HD void enter_root(TreeNode** root) {
    node = *root;
    settled = 0;
  }
  SOAHEAP_HD void count_in_node() {
    if (settled == 0) soaheap::detail::atomic_fetch_add(&static_cast<std::uint64_t&>(node->count), 1);
  }
  /// Moves one level down if the node was split; otherwise the node is this body's leaf.
  SOAHEAP_HD void descend(std::uint64_t* unsettled) {
    if (settled != 0) return;
    TreeNode* current = node;
    if (current->is_leaf()) {
      settled = 1;
      leaf_id = current->id;
      const double m = mass;
      soaheap::detail::atomic_fetch_add(&static_cast<std::uint64_t&>(current->mass), to_fixed(m));
      soaheap::detail::atomic_fetch_add(&static_cast<std::uint64_t&>(current->moment_x), to_fixed(m * static_cast<float>(pos_x)));
      soaheap::detail::atomic_fetch_add(&static_cast<std::uint64_t&>(current->moment_y), to_fixed(m * static_cast<float>(pos_y)));
      return;
    }
    node = static_cast<TreeNode*>(current->children[current->quadrant(pos_x, pos_y)]);
    soaheap::detail::atomic_fetch_add(unsettled, 1);
  }

  SOAHEAP_HD void add_attraction(double other_mass, double other_x, double other_y, const Parameters& p, float& fx,
                                 float& fy) const {
    const float dx = static_cast<float>(other_x) - static_cast<float>(pos_x);
    const float dy = static_cast<float>(other_y) - static_cast<float>(pos_y);
    const float d2 = dx * dx + dy * dy + p.softening * p.softening;
    const float f = p.gravity * static_cast<float>(mass) * static_cast<float>(other_mass) / (d2 * sqrtf(d2));
    fx += f * dx;
    fy += f * dy;
  }

  SOAHEAP_HD void compute_force(TreeNode** root, Parameters p) {
    TreeNode* stack[kStackSize];
    int top = 0;
    stack[top++] = *root;
    float fx = 0, fy = 0;
    TreeNode* own = node;
    while (top > 0) {
      TreeNode* current = stack[--top];
      double m = from_fixed(current->mass);
      if (m <= 0) continue;
      double mx = from_fixed(current->moment_x), my = from_fixed(current->moment_y);
      if (current == own) {  // exclude this body from its own leaf
        const double own_mass = mass;
        m -= own_mass;
        mx -= own_mass * static_cast<float>(pos_x);
        my -= own_mass * static_cast<float>(pos_y);
        if (m <= 1e-9) continue;
        add_attraction(m, mx / m, my / m, p, fx, fy);
        continue;
      }
      const double cx = mx / m, cy = my / m;
      const double dx = cx - static_cast<float>(pos_x), dy = cy - static_cast<float>(pos_y);
      const double size = 2.0 * static_cast<float>(current->half);
      if (current->is_leaf() || size * size < static_cast<double>(p.theta) * p.theta * (dx * dx + dy * dy)) {
        add_attraction(m, cx, cy, p, fx, fy);
      } else {
        for (int k = 0; k < kChildren && top < kStackSize; ++k) stack[top++] = current->children[k];
      }
    }
    force_x = fx;
    force_y = fy;
  }

  SOAHEAP_HD void update(Parameters p) {
    const float inverse_mass = 1.0f / static_cast<float>(mass);
    vel_x += force_x * inverse_mass * p.time_step;
    vel_y += force_y * inverse_mass * p.time_step;
    pos_x += vel_x * p.time_step;
    pos_y += vel_y * p.time_step;
    const float wall = 0.999f * kWorldHalf;
    if (pos_x > wall || pos_x < -wall) { vel_x = -static_cast<float>(vel_x); pos_x = pos_x > 0 ? wall : -wall; }
    if (pos_y > wall || pos_y < -wall) { vel_y = -static_cast<float>(vel_y); pos_y = pos_y > 0 ? wall : -wall; }
  }
};

using BarnesHutHeap = soaheap::Heap<TreeNode, Body>;
using View = BarnesHutHeap::View;

struct CreateRoot {
  View heap;
  TreeNode** root;
  std::uint64_t* next_id;
  SOAHEAP_HD void operator()(std::uint64_t) const {
    *next_id = 1;
    *root = new (heap) TreeNode(0.0f, 0.0f, kWorldHalf, 0, 0, 0);
  }
};

/// Device-side scratch: the root pointer, the next node id and the "bodies still descending" counter.
struct Scratch {
  soaheap::detail::Memory memory;
  explicit Scratch(soaheap::Backend backend) : memory(backend, 3 * sizeof(std::uint64_t)) {}
  TreeNode** root() { return reinterpret_cast<TreeNode**>(memory.as<std::uint64_t>()); }
  std::uint64_t* next_id() { return memory.as<std::uint64_t>() + 1; }
  std::uint64_t* unsettled() { return memory.as<std::uint64_t>() + 2; }
};

/// Destroys the old tree of @p bodies bodies and builds a new one; returns the number of levels.
inline int rebuild(BarnesHutHeap& heap, Scratch& scratch, std::uint64_t bodies) {
  heap.parallel_do<TreeNode, &TreeNode::remove<View>>(heap.view());
  heap.launch(1, CreateRoot{heap.view(), scratch.root(), scratch.next_id()});
  heap.parallel_do<Body, &Body::enter_root>(scratch.root());
  int level = 0;
  for (std::uint64_t unsettled = bodies;; ++level) {
    heap.parallel_do<Body, &Body::count_in_node>();
    if (heap.growable()) {
      // A node splits only with two bodies or more: one level creates at most 2 nodes per
      // unsettled body. A kernel grows the heap by itself up to block_count() (growth_headroom
      // times what is mapped); only a level that may need more maps it first, since reading the
      // blocks in use waits for the GPU (each level waiting: 3 % of the run on an H200).
      constexpr std::uint64_t kPerBlock = BarnesHutHeap::capacity<TreeNode>;
      const std::uint64_t needed = (2 * unsettled + kPerBlock - 1) / kPerBlock;
      if (heap.mapped_block_count() + needed > heap.block_count())
        heap.reserve_blocks(heap.allocated_block_count() + needed);
    }
    heap.parallel_do<TreeNode, &TreeNode::split<View>>(heap.view(), level, scratch.next_id());
    const std::uint64_t zero = 0;
    scratch.memory.copy_from_host(2 * sizeof(std::uint64_t), &zero, sizeof(zero));
    heap.parallel_do<Body, &Body::descend>(scratch.unsettled());
    scratch.memory.copy_to_host(&unsettled, 2 * sizeof(std::uint64_t), sizeof(unsettled));
    if (unsettled == 0) break;
  }
  for (int l = level; l >= 0; --l) heap.parallel_do<TreeNode, &TreeNode::summarize>(l);
  return level + 1;
}

/// Checks the tree invariants on a host copy; returns the number of violations.
inline std::uint64_t check_tree(const BarnesHutHeap& heap, std::uint64_t bodies) {
  struct NodeRecord {
    float x, y, half;
    int depth;
    std::uint64_t count, mass, mx, my;
    std::uint32_t parent;
    bool leaf;
    std::uint64_t child_count = 0, child_mass = 0, child_mx = 0, child_my = 0, child_bodies = 0;
    std::uint64_t body_count = 0, body_mass = 0;
  };
  std::map<std::uint32_t, NodeRecord> nodes;
  std::uint64_t violations = 0;
  heap.for_each<TreeNode>([&](const TreeNode* n) {
    NodeRecord r{n->center_x, n->center_y, n->half, n->depth, n->count, n->mass, n->moment_x, n->moment_y,
                 n->parent_id, n->is_leaf()};
    if (!nodes.emplace(static_cast<std::uint32_t>(n->id), r).second) ++violations;
  });
  for (auto& [id, r] : nodes) {
    if (id == 0) continue;
    auto parent = nodes.find(r.parent);
    if (parent == nodes.end() || parent->second.leaf || parent->second.depth + 1 != r.depth) {
      ++violations;
      continue;
    }
    NodeRecord& p = parent->second;
    ++p.child_count;
    p.child_mass += r.mass;
    p.child_mx += r.mx;
    p.child_my += r.my;
    p.child_bodies += r.count;
    if (std::fabs(r.half * 2 - p.half) > 1e-6f * p.half || std::fabs(std::fabs(r.x - p.x) - r.half) > 1e-5f * p.half ||
        std::fabs(std::fabs(r.y - p.y) - r.half) > 1e-5f * p.half)
      ++violations;  // a child box is one quadrant of its parent's box
  }
  std::uint64_t seen_bodies = 0;
  heap.for_each<Body>([&](const Body* b) {
    ++seen_bodies;
    auto leaf = nodes.find(b->leaf_id);
    if (leaf == nodes.end() || !leaf->second.leaf) {
      ++violations;
      return;
    }
    NodeRecord& r = leaf->second;
    ++r.body_count;
    r.body_mass += to_fixed(static_cast<double>(static_cast<float>(b->mass)));
    const float px = b->pos_x, py = b->pos_y;
    if (px < r.x - r.half || px > r.x + r.half || py < r.y - r.half || py > r.y + r.half) ++violations;
  });
  std::uint64_t bodies_in_leaves = 0;
  for (auto& [id, r] : nodes) {
    if (r.leaf) {
      bodies_in_leaves += r.body_count;
      if (r.body_count != r.count || r.body_mass != r.mass) ++violations;
    } else if (r.child_count != kChildren || r.child_mass != r.mass || r.child_mx != r.mx || r.child_my != r.my ||
               r.child_bodies != r.count) {
      ++violations;
    }
  }
  if (nodes.count(0) == 0 || nodes[0].count != bodies) ++violations;
  if (seen_bodies != bodies || bodies_in_leaves != bodies) ++violations;
  return violations;
}

}  // namespace barnes_hut

namespace {

int run_app(int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli("Barnes-Hut: 2D gravity with a quad tree of TreeNode objects rebuilt every step; --size is the number "
               "of bodies", soaheap_app::AppDefaults{2000, 262144, 20, 100});
  barnes_hut::Parameters parameters;
  cli.option("--theta", parameters.theta, "opening criterion: a node is approximated when size/distance < theta");
  cli.option("--time-step", parameters.time_step, "integration time step");
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions options = cli.options();
  const std::uint64_t bodies = options.size;
  parameters.gravity = 1.0f / static_cast<float>(bodies);

  soaheap::HeapOptions heap_options;
  // Bodies, plus a quad tree of about 3 nodes per body (TreeNode blocks hold half as many objects
  // as Body blocks), plus slack for partly filled blocks.
  heap_options.objects = 16 * bodies + 64 * 64;
  heap_options.backend = options.backend;
  barnes_hut::BarnesHutHeap heap(soaheap_app::heap_options_for(heap_options, options));
  soaheap_app::AppRun<barnes_hut::BarnesHutHeap> run("barnes_hut", options, heap);
  barnes_hut::Scratch scratch(options.backend);
  heap.parallel_new<barnes_hut::Body>(bodies, options.seed);
  int depth = 0;
  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    depth = barnes_hut::rebuild(heap, scratch, bodies);
    heap.parallel_do<barnes_hut::Body, &barnes_hut::Body::compute_force>(scratch.root(), parameters);
    heap.parallel_do<barnes_hut::Body, &barnes_hut::Body::update>(parameters);
    run.after_iteration(iteration);
  }
  run.stop_clock();
  const std::uint64_t nodes_before_check = heap.count<barnes_hut::TreeNode>();
  depth = barnes_hut::rebuild(heap, scratch, bodies);
  const std::uint64_t violations = barnes_hut::check_tree(heap, bodies);
  heap.validate(soaheap::Validation::structure);
  soaheap_app::Result extra;
  extra["bodies"] = bodies;
  extra["tree_nodes"] = nodes_before_check;
  extra["tree_depth"] = depth;
  extra["self_check_violations"] = violations;
  return run.finish(violations == 0, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("barnes_hut", [&] { return run_app(argc, argv); });
}
