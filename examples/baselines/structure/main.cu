// Structure baseline: the model of examples/structure (same procedural mesh, same float arithmetic
// in the same order, same BFS removal) written by hand on fixed SOA arrays with an active flag
// and no allocator, as the DynaSOAr paper's baselines for "allocate up front, then only free"
// applications. Springs are indexed site * 3 + direction; a broken or removed spring or node just
// clears its active flag. Kernels run through the same executor as the heap (CUDA grid or host
// thread pool). Prints the same JSON fields as structure, and checks the same connectivity
// invariants after every BFS (small meshes) or at the end.

#include "examples/common/counter_hash.cuh"
#include "examples/common/baseline.cuh"

#include <soaheap/core/backend.cuh>
#include <soaheap/core/memory.cuh>
#include <soaheap/core/thread_pool.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <queue>
#include <string>
#include <vector>

namespace structure_baseline {

constexpr int kMaxSprings = 6;
constexpr int kDirections = 3;  // each site owns its springs to the right, down and down-right
constexpr std::int32_t kNone = -1;
enum Kind : std::uint8_t { kNode = 0, kAnchor = 1, kAnchorPull = 2 };
enum Salt : std::uint64_t { kSaltHole = 1, kSaltSpring = 2, kSaltStrain = 3 };

SOAHEAP_HD constexpr int opposite_slot(int slot) { return (slot + kMaxSprings / 2) % kMaxSprings; }

struct Physics {  // the defaults of examples/structure
  float time_step = 0.05f;
  float damping = 0.98f;
  float stiffness = 20.0f;
  float mass = 1.0f;
  float pull_speed = 0.5f;
  float breaking_strain = 0.12f;
  float prestrain = 0.12f;
  std::uint32_t hole_per_mille = 30;
  std::uint32_t missing_spring_per_mille = 50;
};

using soaheap_app::splitmix_hash3;

struct Nodes {
  float *x, *y, *velocity_x, *velocity_y, *mass, *pull_x;
  std::int32_t* springs;  ///< kMaxSprings per node, kNone when empty
  std::uint64_t* reached;
  std::uint8_t* kind;
  std::uint8_t* active;
};
struct Springs {
  std::uint32_t *a, *b;
  float *force_x, *force_y, *rest_length, *breaking_strain;
  std::uint8_t *slot_a, *slot_b;
  std::uint8_t* active;
};
struct Counters {
  std::uint64_t* values;  // broken, removed nodes, removed springs, changed
};
enum Counter { kBroken, kRemovedNodes, kRemovedSprings, kChanged, kCounters };

struct Mesh {
  std::uint32_t width, height;
  std::uint64_t seed;
  Physics physics;
  SOAHEAP_HD bool has_node(std::uint32_t col, std::uint32_t row) const {
    if (col == 0 || col + 1 == width) return true;
    return splitmix_hash3(seed, kSaltHole, std::uint64_t{row} * width + col) % 1000 >= physics.hole_per_mille;
  }
};

struct CreateNodes {
  Nodes n;
  Mesh mesh;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    const std::uint32_t col = static_cast<std::uint32_t>(i % mesh.width), row = static_cast<std::uint32_t>(i / mesh.width);
    const float spacing = 1.0f + mesh.physics.prestrain;
    n.x[i] = static_cast<float>(col) * spacing;
    n.y[i] = static_cast<float>(row) * spacing;
    n.velocity_x[i] = 0.0f;
    n.velocity_y[i] = 0.0f;
    n.mass[i] = mesh.physics.mass;
    n.pull_x[i] = col + 1 == mesh.width ? mesh.physics.pull_speed : 0.0f;
    n.kind[i] = col == 0 ? kAnchor : (col + 1 == mesh.width ? kAnchorPull : kNode);
    n.reached[i] = 0;
    n.active[i] = mesh.has_node(col, row) ? 1 : 0;
    for (int s = 0; s < kMaxSprings; ++s) n.springs[i * kMaxSprings + s] = kNone;
  }
};

/// Spring site * 3 + direction joins the site with its right / down / down-right neighbour.
struct CreateSprings {
  Nodes n;
  Springs s;
  Mesh mesh;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    const std::uint32_t col = static_cast<std::uint32_t>(i % mesh.width), row = static_cast<std::uint32_t>(i / mesh.width);
    const int dcol[kDirections] = {1, 0, 1}, drow[kDirections] = {0, 1, 1};
    for (int direction = 0; direction < kDirections; ++direction) {
      const std::uint64_t key = i * kDirections + static_cast<std::uint64_t>(direction);
      s.active[key] = 0;
      if (!n.active[i]) continue;
      const std::uint32_t c = col + static_cast<std::uint32_t>(dcol[direction]);
      const std::uint32_t r = row + static_cast<std::uint32_t>(drow[direction]);
      if (c >= mesh.width || r >= mesh.height) continue;
      const std::uint64_t other = std::uint64_t{r} * mesh.width + c;
      if (!n.active[other]) continue;
      if (splitmix_hash3(mesh.seed, kSaltSpring, key) % 1000 < mesh.physics.missing_spring_per_mille) continue;
      const float variation = 0.6f + 0.8f * static_cast<float>(splitmix_hash3(mesh.seed, kSaltStrain, key) % 10000) / 10000.0f;
      s.a[key] = static_cast<std::uint32_t>(i);
      s.b[key] = static_cast<std::uint32_t>(other);
      s.force_x[key] = 0.0f;
      s.force_y[key] = 0.0f;
      s.rest_length[key] = direction == 2 ? 1.41421356f : 1.0f;
      s.breaking_strain[key] = mesh.physics.breaking_strain * variation;
      s.slot_a[key] = static_cast<std::uint8_t>(direction);
      s.slot_b[key] = static_cast<std::uint8_t>(opposite_slot(direction));
      s.active[key] = 1;
      n.springs[i * kMaxSprings + direction] = static_cast<std::int32_t>(key);
      n.springs[other * kMaxSprings + opposite_slot(direction)] = static_cast<std::int32_t>(key);
    }
  }
};

struct ComputeForce {
  Nodes n;
  Springs s;
  float stiffness;
  std::uint64_t* broken;
  SOAHEAP_HD void operator()(std::uint64_t k) const {
    if (!s.active[k]) return;
    const std::uint32_t a = s.a[k], b = s.b[k];
    const float dx = n.x[b] - n.x[a];
    const float dy = n.y[b] - n.y[a];
    const float length = sqrtf(dx * dx + dy * dy);
    const float rest = s.rest_length[k];
    if ((length - rest) / rest > s.breaking_strain[k]) {
      n.springs[std::uint64_t{a} * kMaxSprings + s.slot_a[k]] = kNone;
      n.springs[std::uint64_t{b} * kMaxSprings + s.slot_b[k]] = kNone;
      s.active[k] = 0;
      soaheap::detail::atomic_fetch_add(broken, 1);
      return;
    }
    const float tension = length > 0.0f ? stiffness * (length - rest) / length : 0.0f;
    s.force_x[k] = tension * dx;
    s.force_y[k] = tension * dy;
  }
};

struct Move {
  Nodes n;
  Springs s;
  float time_step, damping;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    if (!n.active[i]) return;
    if (n.kind[i] == kAnchorPull) {
      n.x[i] += n.pull_x[i] * time_step;
      n.y[i] += 0.0f * time_step;
      return;
    }
    if (n.kind[i] != kNode) return;
    float fx = 0.0f, fy = 0.0f;
    for (int slot = 0; slot < kMaxSprings; ++slot) {
      const std::int32_t k = n.springs[i * kMaxSprings + slot];
      if (k == kNone) continue;
      const float sign = s.a[k] == i ? 1.0f : -1.0f;
      fx += sign * s.force_x[k];
      fy += sign * s.force_y[k];
    }
    const float m = n.mass[i];
    const float vx = (n.velocity_x[i] + fx / m * time_step) * damping;
    const float vy = (n.velocity_y[i] + fy / m * time_step) * damping;
    n.velocity_x[i] = vx;
    n.velocity_y[i] = vy;
    n.x[i] += vx * time_step;
    n.y[i] += vy * time_step;
  }
};

struct ResetReached {
  Nodes n;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    soaheap::detail::atomic_store(&n.reached[i], n.active[i] && n.kind[i] != kNode ? 1 : 0);
  }
};

/// As in examples/structure: a thread that newly marks a node goes on from it depth-first.
constexpr int kPropagationStack = 32;

struct Propagate {
  Nodes n;
  Springs s;
  std::uint64_t* changed;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    if (!n.active[i] || soaheap::detail::atomic_load(&n.reached[i]) == 0) return;
    std::uint32_t pending[kPropagationStack];
    int depth = 0;
    pending[depth++] = static_cast<std::uint32_t>(i);
    std::uint64_t newly_reached = 0;
    while (depth > 0) {
      const std::uint32_t node = pending[--depth];
      for (int slot = 0; slot < kMaxSprings; ++slot) {
        const std::int32_t k = n.springs[std::uint64_t{node} * kMaxSprings + slot];
        if (k == kNone) continue;
        const std::uint32_t other = s.a[k] == node ? s.b[k] : s.a[k];
        if (soaheap::detail::atomic_load(&n.reached[other]) == 0 &&
            soaheap::detail::atomic_cas(&n.reached[other], 0, 1) == 0) {
          ++newly_reached;
          if (depth < kPropagationStack) pending[depth++] = other;
        }
      }
    }
    if (newly_reached != 0) soaheap::detail::atomic_fetch_add(changed, newly_reached);
  }
};

struct RemoveDetachedSprings {
  Nodes n;
  Springs s;
  std::uint64_t* removed;
  SOAHEAP_HD void operator()(std::uint64_t k) const {
    if (!s.active[k] || soaheap::detail::atomic_load(&n.reached[s.a[k]]) != 0) return;
    s.active[k] = 0;
    soaheap::detail::atomic_fetch_add(removed, 1);
  }
};

struct RemoveDetachedNodes {
  Nodes n;
  std::uint64_t* removed;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    if (!n.active[i] || soaheap::detail::atomic_load(&n.reached[i]) != 0) return;
    n.active[i] = 0;
    soaheap::detail::atomic_fetch_add(removed, 1);
  }
};

}  // namespace structure_baseline

namespace {

using namespace structure_baseline;
using soaheap::detail::Memory;

constexpr std::uint64_t kCheckEveryBfsMaxNodes = 1u << 16;

/// Host copies of the arrays the invariants need.
struct HostMesh {
  std::vector<std::uint8_t> node_active, spring_active, kind;
  std::vector<std::int32_t> slots;
  std::vector<std::uint32_t> a, b;
};

std::uint64_t check_connectivity(const HostMesh& m) {
  const std::size_t nodes = m.node_active.size();
  std::uint64_t violations = 0;
  const auto report = [&](const char* what, std::uint64_t id) {
    if (violations < 5) std::fprintf(stderr, "structure_baseline self-check: %s (%llu)\n", what, static_cast<unsigned long long>(id));
    ++violations;
  };
  std::vector<int> named(nodes, 0);
  std::vector<std::vector<std::uint32_t>> adjacency(nodes);
  for (std::size_t k = 0; k < m.spring_active.size(); ++k) {
    if (!m.spring_active[k]) continue;
    if (!m.node_active[m.a[k]] || !m.node_active[m.b[k]]) {
      report("spring endpoint is not alive", k);
      continue;
    }
    named[m.a[k]] += 1;
    named[m.b[k]] += 1;
    adjacency[m.a[k]].push_back(m.b[k]);
    adjacency[m.b[k]].push_back(m.a[k]);
  }
  std::vector<std::uint8_t> reached(nodes, 0);
  std::queue<std::uint32_t> frontier;
  for (std::uint32_t i = 0; i < nodes; ++i) {
    if (!m.node_active[i]) continue;
    int linked = 0;
    for (int s = 0; s < kMaxSprings; ++s) {
      const std::int32_t k = m.slots[std::size_t{i} * kMaxSprings + s];
      if (k != kNone) linked += m.spring_active[static_cast<std::size_t>(k)] ? 1 : 0;
    }
    if (linked != named[i]) report("spring slots disagree with the springs", i);
    if (m.kind[i] != kNode) {
      reached[i] = 1;
      frontier.push(i);
    }
  }
  while (!frontier.empty()) {
    const std::uint32_t i = frontier.front();
    frontier.pop();
    for (const std::uint32_t other : adjacency[i])
      if (!reached[other]) {
        reached[other] = 1;
        frontier.push(other);
      }
  }
  for (std::uint32_t i = 0; i < nodes; ++i)
    if (m.node_active[i] && !reached[i]) report("node not reachable from an anchor", i);
  return violations;
}

int run_app(int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli("Structure baseline: the structure model on fixed arrays with active flags, without an allocator", soaheap_app::AppDefaults{48, 512, 300, 5000});
  Physics physics;
  int bfs_interval = 10;
  cli.option("--bfs-interval", bfs_interval, "Run the BFS (and remove detached fragments) every this many iterations", 1,
             1 << 30);
  cli.option("--pull-speed", physics.pull_speed, "Speed of the pulled right column");
  cli.option("--prestrain", physics.prestrain, "Initial stretch of the mesh (both directions)");
  cli.option("--breaking-strain", physics.breaking_strain, "Mean strain at which a spring breaks");
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions options = cli.options();
  const auto start = std::chrono::steady_clock::now();

  const std::uint32_t side = static_cast<std::uint32_t>(std::max<std::uint64_t>(options.size, 2));
  const Mesh mesh{side, side, options.seed, physics};
  const std::uint64_t sites = std::uint64_t{side} * side, spring_slots = sites * kDirections;
  const soaheap::Backend backend = options.backend;
  std::unique_ptr<soaheap::detail::ThreadPool> pool;
  const soaheap::detail::Executor executor = soaheap_app::baseline_executor(backend, "structure_baseline", pool);
  std::vector<Memory> owned;
  std::uint64_t memory_bytes = 0;
  const auto array = [&](std::uint64_t bytes) {
    owned.emplace_back(backend, bytes);
    memory_bytes += bytes;
    return owned.back().get();
  };
  owned.reserve(32);
  const Nodes nodes{static_cast<float*>(array(sites * 4)),        static_cast<float*>(array(sites * 4)),
                    static_cast<float*>(array(sites * 4)),        static_cast<float*>(array(sites * 4)),
                    static_cast<float*>(array(sites * 4)),        static_cast<float*>(array(sites * 4)),
                    static_cast<std::int32_t*>(array(sites * kMaxSprings * 4)), static_cast<std::uint64_t*>(array(sites * 8)),
                    static_cast<std::uint8_t*>(array(sites)),     static_cast<std::uint8_t*>(array(sites))};
  const Springs springs{static_cast<std::uint32_t*>(array(spring_slots * 4)), static_cast<std::uint32_t*>(array(spring_slots * 4)),
                        static_cast<float*>(array(spring_slots * 4)),         static_cast<float*>(array(spring_slots * 4)),
                        static_cast<float*>(array(spring_slots * 4)),         static_cast<float*>(array(spring_slots * 4)),
                        static_cast<std::uint8_t*>(array(spring_slots)),      static_cast<std::uint8_t*>(array(spring_slots)),
                        static_cast<std::uint8_t*>(array(spring_slots))};
  Memory counters(backend, kCounters * sizeof(std::uint64_t));
  counters.fill_zero();
  std::uint64_t* counter = counters.as<std::uint64_t>();
  const auto read_counter = [&](int which) {
    std::uint64_t value = 0;
    counters.copy_to_host(&value, which * sizeof(std::uint64_t), sizeof(value));
    return value;
  };
  const auto download = [&](const void* device, std::uint64_t bytes, auto& vector) {
    vector.resize(bytes / sizeof(vector[0]));
    if (backend == soaheap::Backend::host) {
      std::memcpy(vector.data(), device, bytes);
    } else {
#if SOAHEAP_HAS_CUDA
      SOAHEAP_CUDA_CHECK(cudaMemcpy(vector.data(), device, bytes, cudaMemcpyDeviceToHost));
#endif
    }
  };
  const auto snapshot = [&] {
    HostMesh m;
    download(nodes.active, sites, m.node_active);
    download(springs.active, spring_slots, m.spring_active);
    download(nodes.kind, sites, m.kind);
    download(nodes.springs, sites * kMaxSprings * 4, m.slots);
    download(springs.a, spring_slots * 4, m.a);
    download(springs.b, spring_slots * 4, m.b);
    return m;
  };
  const auto count_active = [](const std::vector<std::uint8_t>& flags) {
    return static_cast<std::uint64_t>(std::count(flags.begin(), flags.end(), std::uint8_t{1}));
  };

  executor.launch(sites, CreateNodes{nodes, mesh});
  executor.launch(sites, CreateSprings{nodes, springs, mesh});
  const std::uint64_t initial_springs = count_active(snapshot().spring_active);
  const bool check_every_bfs = sites <= kCheckEveryBfsMaxNodes;
  std::uint64_t violations = 0, bfs_runs = 0;
  const auto bfs_and_remove = [&] {
    executor.launch(sites, ResetReached{nodes});
    for (;;) {
      const std::uint64_t zero = 0;
      counters.copy_from_host(kChanged * sizeof(std::uint64_t), &zero, sizeof(zero));
      executor.launch(sites, Propagate{nodes, springs, counter + kChanged});
      if (read_counter(kChanged) == 0) break;
    }
    executor.launch(spring_slots, RemoveDetachedSprings{nodes, springs, counter + kRemovedSprings});
    executor.launch(sites, RemoveDetachedNodes{nodes, counter + kRemovedNodes});
    ++bfs_runs;
    if (check_every_bfs) violations += check_connectivity(snapshot());
  };
  const auto loop_start = std::chrono::steady_clock::now();
  for (int it = 0; it < options.iterations; ++it) {
    executor.launch(spring_slots, ComputeForce{nodes, springs, physics.stiffness, counter + kBroken});
    executor.launch(sites, Move{nodes, springs, physics.time_step, physics.damping});
    if ((it + 1) % bfs_interval == 0) bfs_and_remove();
  }
  bfs_and_remove();
  executor.synchronize();  // kernels run asynchronously; the timed part ends when they are done
  const double loop_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count();
  const double timed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const HostMesh final_mesh = snapshot();
  if (!check_every_bfs) violations += check_connectivity(final_mesh);

  std::uint64_t per_kind[3] = {0, 0, 0};
  for (std::uint64_t i = 0; i < sites; ++i)
    if (final_mesh.node_active[i]) per_kind[final_mesh.kind[i]] += 1;
  const bool passed = violations == 0;
  soaheap_app::BaselineResult result;
  result.app = "structure_baseline";
  result.start = start;
  result.timed_seconds = timed_seconds;
  result.simulation_seconds = loop_seconds;
  result.objects = {{"Node", per_kind[kNode]},
                    {"AnchorNode", per_kind[kAnchor]},
                    {"AnchorPullNode", per_kind[kAnchorPull]},
                    {"Spring", count_active(final_mesh.spring_active)}};
  result.memory_bytes = memory_bytes;
  result.self_check_passed = passed;
  result.extra["mesh"] = {side, side};
  result.extra["initial_springs"] = initial_springs;
  result.extra["broken_springs"] = read_counter(kBroken);
  result.extra["removed_nodes"] = read_counter(kRemovedNodes);
  result.extra["removed_springs"] = read_counter(kRemovedSprings);
  result.extra["bfs_runs"] = bfs_runs;
  result.extra["self_check_violations"] = violations;
  return soaheap_app::finish_baseline(result, options);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("structure_baseline", [&] { return run_app(argc, argv); });
}
