// The collision benchmark without an allocator: the same physics as examples/collision (shared
// through collision/physics.cuh) over fixed, hand-written SOA arrays with an "active" flag per body.
// Comparing its time with `collision` measures what the object heap costs. Prints one JSON line with
// the same fields as `collision`.

#include "examples/applications/collision/physics.cuh"
#include "examples/common/baseline.cuh"

#include <soaheap/base/log.hpp>
#include <soaheap/core/memory.cuh>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

namespace collision {

/// Device (or host) pointers to the body arrays; trivially copyable, passed to every kernel.
struct Bodies {
  std::uint64_t count;
  std::uint8_t* active;
  float* pos_x;
  float* pos_y;
  float* vel_x;
  float* vel_y;
  long long* acceleration_x;
  long long* acceleration_y;
  float* mass;
  std::uint64_t* merge_target;  ///< index of the body this one merges into, or kNoBody
  std::uint64_t* accepted;      ///< index of the body this one absorbs, or kNoBody
};

struct Initialize {
  Bodies bodies;
  std::uint64_t seed;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    const InitialBody initial = initial_body(seed, i, bodies.count);
    bodies.active[i] = 1;
    bodies.pos_x[i] = initial.x;
    bodies.pos_y[i] = initial.y;
    bodies.vel_x[i] = initial.vx;
    bodies.vel_y[i] = initial.vy;
    bodies.mass[i] = initial.mass;
    bodies.merge_target[i] = kNoBody;
    bodies.accepted[i] = kNoBody;
  }
};

struct ComputeForce {
  Bodies bodies;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    if (!bodies.active[i]) return;
    long long ax = 0, ay = 0;
    for (std::uint64_t j = 0; j < bodies.count; ++j) {
      if (j == i || !bodies.active[j]) continue;
      add_acceleration(bodies.pos_x[i], bodies.pos_y[i], bodies.pos_x[j], bodies.pos_y[j], bodies.mass[j], ax, ay);
    }
    bodies.acceleration_x[i] = ax;
    bodies.acceleration_y[i] = ay;
  }
};

struct Update {
  Bodies bodies;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    if (!bodies.active[i]) return;
    integrate(bodies.acceleration_x[i], bodies.acceleration_y[i], bodies.pos_x[i], bodies.pos_y[i], bodies.vel_x[i],
              bodies.vel_y[i]);
  }
};

struct FindMergeTarget {
  Bodies bodies;
  float radius;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    if (!bodies.active[i]) return;
    const float radius_squared = radius * radius;
    float best_distance_squared = radius_squared * 2.0f + 1.0f;
    std::uint64_t best = kNoBody;
    for (std::uint64_t j = 0; j < bodies.count; ++j) {
      if (j == i || !bodies.active[j]) continue;
      if (!absorbs(bodies.mass[j], j, bodies.mass[i], i)) continue;
      const float dx = bodies.pos_x[j] - bodies.pos_x[i];
      const float dy = bodies.pos_y[j] - bodies.pos_y[i];
      const float distance_squared = dx * dx + dy * dy;
      if (distance_squared > radius_squared) continue;
      if (closer(distance_squared, j, best_distance_squared, best)) {
        best_distance_squared = distance_squared;
        best = j;
      }
    }
    bodies.merge_target[i] = best;
  }
};

struct AcceptMerge {
  Bodies bodies;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    if (!bodies.active[i]) return;
    bodies.accepted[i] = kNoBody;
    if (bodies.merge_target[i] != kNoBody) return;
    float best_distance_squared = INFINITY;
    std::uint64_t best = kNoBody;
    for (std::uint64_t j = 0; j < bodies.count; ++j) {
      if (!bodies.active[j] || bodies.merge_target[j] != i) continue;
      const float dx = bodies.pos_x[j] - bodies.pos_x[i];
      const float dy = bodies.pos_y[j] - bodies.pos_y[i];
      const float distance_squared = dx * dx + dy * dy;
      if (closer(distance_squared, j, best_distance_squared, best)) {
        best_distance_squared = distance_squared;
        best = j;
      }
    }
    if (best == kNoBody) return;
    merge_into(bodies.mass[i], bodies.pos_x[i], bodies.pos_y[i], bodies.vel_x[i], bodies.vel_y[i], bodies.mass[best],
               bodies.pos_x[best], bodies.pos_y[best], bodies.vel_x[best], bodies.vel_y[best]);
    bodies.accepted[i] = best;
  }
};

struct FinishMerge {
  Bodies bodies;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    if (!bodies.active[i]) return;
    const std::uint64_t target = bodies.merge_target[i];
    if (target != kNoBody && bodies.accepted[target] == i) {
      bodies.active[i] = 0;
      return;
    }
    bodies.merge_target[i] = kNoBody;
  }
};

/// Owns the arrays in the memory of @p backend.
class BodyArrays {
 public:
  BodyArrays(soaheap::Backend backend, std::uint64_t count) : count_(count) {
    using soaheap::detail::Memory;
    active_ = Memory(backend, count);
    floats_ = Memory(backend, 5 * count * sizeof(float));
    accelerations_ = Memory(backend, 2 * count * sizeof(long long));
    links_ = Memory(backend, 2 * count * sizeof(std::uint64_t));
  }
  Bodies bodies() const {
    Bodies b;
    b.count = count_;
    b.active = active_.as<std::uint8_t>();
    float* floats = floats_.as<float>();
    b.pos_x = floats;
    b.pos_y = floats + count_;
    b.vel_x = floats + 2 * count_;
    b.vel_y = floats + 3 * count_;
    b.mass = floats + 4 * count_;
    b.acceleration_x = accelerations_.as<long long>();
    b.acceleration_y = accelerations_.as<long long>() + count_;
    b.merge_target = links_.as<std::uint64_t>();
    b.accepted = links_.as<std::uint64_t>() + count_;
    return b;
  }
  /// Bytes allocated for all arrays.
  std::uint64_t bytes() const {
    return count_ * (sizeof(std::uint8_t) + 5 * sizeof(float) + 2 * sizeof(long long) + 2 * sizeof(std::uint64_t));
  }
  /// Live bodies and their total mass (summed in double on the host).
  void totals(std::uint64_t& live, double& total_mass) const {
    std::vector<std::uint8_t> active(count_);
    std::vector<float> mass(count_);
    active_.copy_to_host(active.data(), 0, count_);
    floats_.copy_to_host(mass.data(), 4 * count_ * sizeof(float), count_ * sizeof(float));
    live = 0;
    total_mass = 0;
    for (std::uint64_t i = 0; i < count_; ++i) {
      if (!active[i]) continue;
      ++live;
      total_mass += mass[i];
    }
  }

 private:
  std::uint64_t count_;
  soaheap::detail::Memory active_, floats_, accelerations_, links_;
};

int run(int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli(
      "n-body simulation with collisions over fixed SOA arrays, no allocator (one JSON result line)",
      {/*host_size*/ 1024, /*cuda_size*/ 65536, /*host_iterations*/ 50, /*cuda_iterations*/ 100});
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions options = cli.options();
  if (!options.defrag_policy.empty() && options.defrag_policy != "none")
    soaheap::log::warn("collision_baseline has no heap: --defrag-policy ", options.defrag_policy, " is ignored");

  std::unique_ptr<soaheap::detail::ThreadPool> pool;
  const soaheap::detail::Executor executor = soaheap_app::baseline_executor(options.backend, "collision_baseline", pool);

  const auto start = std::chrono::steady_clock::now();
  BodyArrays arrays(options.backend, options.size);
  const Bodies bodies = arrays.bodies();
  executor.launch(options.size, Initialize{bodies, options.seed});
  std::uint64_t live = 0;
  double mass_before = 0, mass_after = 0;
  arrays.totals(live, mass_before);
  const float radius = collision_radius(options.size);
  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    executor.launch(options.size, ComputeForce{bodies});
    executor.launch(options.size, Update{bodies});
    executor.launch(options.size, FindMergeTarget{bodies, radius});
    executor.launch(options.size, AcceptMerge{bodies});
    executor.launch(options.size, FinishMerge{bodies});
  }
  executor.synchronize();  // kernels run asynchronously; the timed part ends when they are done
  const double total_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  arrays.totals(live, mass_after);
  const bool conserved = std::fabs(mass_after - mass_before) <= kMassTolerance * mass_before;
  soaheap_app::BaselineResult result;
  result.app = "collision_baseline";
  result.start = start;
  result.timed_seconds = total_time_s;
  result.simulation_seconds = total_time_s;
  result.objects = {{"Body", live}};
  result.memory_bytes = arrays.bytes();
  result.self_check_passed = conserved;
  result.extra["bodies_left"] = live;
  result.extra["total_mass_before"] = mass_before;
  result.extra["total_mass_after"] = mass_after;
  return soaheap_app::finish_baseline(result, options);
}

}  // namespace collision

int main(int argc, char** argv) {
  return soaheap_app::run_main("collision_baseline", [&] { return collision::run(argc, argv); });
}
