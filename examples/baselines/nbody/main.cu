// N-body baseline: the model of examples/nbody (same initial state, same float arithmetic, same
// fixed-point force sums) written by hand on fixed SOA arrays with an active flag and no
// allocator, so that the allocator's overhead can be measured against code without dynamic
// allocation (as in the DynaSOAr paper). Kernels run through the same executor as the heap
// (CUDA grid or host thread pool). Prints the same JSON fields as the application.

#include "examples/common/counter_hash.cuh"
#include "examples/common/baseline.cuh"

#include <soaheap/core/backend.cuh>
#include <soaheap/core/memory.cuh>
#include <soaheap/core/thread_pool.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nbody_baseline {

constexpr double kForceScale = 1099511627776.0;  // 2^40, as in examples/nbody

using soaheap_app::hash3;
using soaheap_app::uniform_float;
SOAHEAP_HD inline long long to_fixed(float value) { return static_cast<long long>(static_cast<double>(value) * kForceScale); }

/// The bodies: one array per field, plus the active flag of the papers' baselines.
struct Bodies {
  float* pos_x;
  float* pos_y;
  float* vel_x;
  float* vel_y;
  float* mass;
  long long* force_x;
  long long* force_y;
  unsigned char* active;
  std::uint64_t count;
};

struct Initialize {
  Bodies b;
  std::uint64_t seed;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    const float radius = sqrtf(uniform_float(seed, 0, i));
    const float angle = 6.2831853f * uniform_float(seed, 1, i);
    b.pos_x[i] = radius * cosf(angle);
    b.pos_y[i] = radius * sinf(angle);
    const float spin = 0.3f;
    b.vel_x[i] = -spin * radius * sinf(angle) + 0.05f * (uniform_float(seed, 2, i) - 0.5f);
    b.vel_y[i] = spin * radius * cosf(angle) + 0.05f * (uniform_float(seed, 3, i) - 0.5f);
    b.mass[i] = 0.5f + uniform_float(seed, 4, i);
    b.force_x[i] = 0;
    b.force_y[i] = 0;
    b.active[i] = 1;
  }
};

struct ComputeForce {
  Bodies b;
  float gravity, softening;
  SOAHEAP_HD void operator()(std::uint64_t target) const {
    if (!b.active[target]) return;
    long long fx = 0, fy = 0;
    const float tx = b.pos_x[target], ty = b.pos_y[target], tm = b.mass[target];
    for (std::uint64_t j = 0; j < b.count; ++j) {
      if (j == target || !b.active[j]) continue;
      const float dx = b.pos_x[j] - tx;
      const float dy = b.pos_y[j] - ty;
      const float distance_squared = dx * dx + dy * dy + softening * softening;
      const float inverse = 1.0f / (distance_squared * sqrtf(distance_squared));
      const float magnitude = gravity * (b.mass[j] * tm) * inverse;
      fx += to_fixed(magnitude * dx);
      fy += to_fixed(magnitude * dy);
    }
    b.force_x[target] = fx;
    b.force_y[target] = fy;
  }
};

struct Update {
  Bodies b;
  float time_step;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    if (!b.active[i]) return;
    const float inverse_mass = 1.0f / b.mass[i];
    b.vel_x[i] += static_cast<float>(static_cast<double>(b.force_x[i]) / kForceScale) * inverse_mass * time_step;
    b.vel_y[i] += static_cast<float>(static_cast<double>(b.force_y[i]) / kForceScale) * inverse_mass * time_step;
    b.pos_x[i] += b.vel_x[i] * time_step;
    b.pos_y[i] += b.vel_y[i] * time_step;
  }
};

struct Totals {
  double momentum_x = 0, momentum_y = 0, momentum_scale = 0, kinetic = 0, potential = 0;
};

inline Totals measure(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& vx,
                      const std::vector<float>& vy, const std::vector<float>& m, float gravity, float softening) {
  Totals t;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double mi = m[i], vxi = vx[i], vyi = vy[i];
    t.momentum_x += mi * vxi;
    t.momentum_y += mi * vyi;
    t.momentum_scale += mi * std::sqrt(vxi * vxi + vyi * vyi);
    t.kinetic += 0.5 * mi * (vxi * vxi + vyi * vyi);
  }
  const double eps2 = static_cast<double>(softening) * softening;
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::size_t j = i + 1; j < x.size(); ++j) {
      const double dx = static_cast<double>(x[i]) - x[j], dy = static_cast<double>(y[i]) - y[j];
      t.potential -= gravity * static_cast<double>(m[i]) * m[j] / std::sqrt(dx * dx + dy * dy + eps2);
    }
  return t;
}

}  // namespace nbody_baseline

namespace {

int run_app(int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli("N-body baseline: examples/nbody on fixed SOA arrays without the allocator (the defragmentation "
               "options are accepted for a uniform command line and ignored); --size is the number of bodies", soaheap_app::AppDefaults{800, 16384, 40, 200});
  float time_step = 5e-4f, softening = 0.05f;
  cli.option("--time-step", time_step, "integration time step");
  cli.option("--softening", softening, "Plummer softening length");
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions options = cli.options();
  const std::uint64_t n = options.size;
  const float gravity = 1.0f / static_cast<float>(n);
  const auto start = std::chrono::steady_clock::now();

  using soaheap::detail::Memory;
  const soaheap::Backend backend = options.backend;
  std::unique_ptr<soaheap::detail::ThreadPool> pool;
  const soaheap::detail::Executor executor = soaheap_app::baseline_executor(backend, "nbody_baseline", pool);
  Memory pos_x(backend, n * sizeof(float)), pos_y(backend, n * sizeof(float)), vel_x(backend, n * sizeof(float)),
      vel_y(backend, n * sizeof(float)), mass(backend, n * sizeof(float)), force_x(backend, n * sizeof(long long)),
      force_y(backend, n * sizeof(long long)), active(backend, n);
  const nbody_baseline::Bodies bodies{pos_x.as<float>(), pos_y.as<float>(), vel_x.as<float>(), vel_y.as<float>(),
                                      mass.as<float>(), force_x.as<long long>(), force_y.as<long long>(),
                                      active.as<unsigned char>(), n};
  const std::uint64_t memory_bytes = 5 * n * sizeof(float) + 2 * n * sizeof(long long) + n;

  const auto download = [&](Memory& memory) {
    std::vector<float> values(n);
    memory.copy_to_host(values.data(), 0, n * sizeof(float));
    return values;
  };
  const auto measure = [&] {
    return nbody_baseline::measure(download(pos_x), download(pos_y), download(vel_x), download(vel_y), download(mass),
                                   gravity, softening);
  };

  executor.launch(n, nbody_baseline::Initialize{bodies, options.seed});
  const nbody_baseline::Totals before = measure();
  const auto loop_start = std::chrono::steady_clock::now();
  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    executor.launch(n, nbody_baseline::ComputeForce{bodies, gravity, softening});
    executor.launch(n, nbody_baseline::Update{bodies, time_step});
  }
  executor.synchronize();  // kernels run asynchronously; the timed part ends when they are done
  const double loop_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count();
  const double timed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const nbody_baseline::Totals after = measure();

  const double momentum_error = std::hypot(after.momentum_x - before.momentum_x, after.momentum_y - before.momentum_y) /
                                std::max(before.momentum_scale, 1e-30);
  const double energy_after = after.kinetic + after.potential;
  const double energy_drift = std::fabs(energy_after - (before.kinetic + before.potential)) /
                              std::max(before.kinetic + std::fabs(before.potential), 1e-30);
  const bool passed = std::isfinite(energy_after) && momentum_error <= 1e-4 && energy_drift <= 2e-2;
  soaheap_app::BaselineResult result;
  result.app = "nbody_baseline";
  result.start = start;
  result.timed_seconds = timed_seconds;
  result.simulation_seconds = loop_seconds;
  result.objects = {{"Body", n}};
  result.memory_bytes = memory_bytes;
  result.self_check_passed = passed;
  result.extra["bodies"] = n;
  result.extra["momentum_error"] = momentum_error;
  result.extra["energy_drift"] = energy_drift;
  result.extra["energy"] = energy_after;
  return soaheap_app::finish_baseline(result, options);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("nbody_baseline", [&] { return run_app(argc, argv); });
}
