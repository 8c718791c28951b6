// N-body: all-pairs gravity between Body objects (DynaSOAr paper, Section 6, category 1: every
// object is allocated up front, nothing is deallocated). Each body sums the forces on it with a
// device_do over all bodies, then a second parallel_do advances it (semi-implicit Euler).
//
// Determinism: per-pair forces are converted to 64-bit fixed point before they are summed, so the
// total does not depend on the order in which device_do meets the other bodies (which depends on
// where the allocator put them). Pair forces are computed antisymmetrically, so the fixed-point
// forces cancel exactly and total momentum only changes by the rounding of the velocity update.
// Self-check: momentum conservation and a bound on the drift of the total energy.

#include "examples/common/app.cuh"
#include "examples/common/counter_hash.cuh"

#include <soaheap/soaheap.cuh>

#include <cmath>
#include <cstdint>
#include <string>

namespace nbody {

struct Parameters {
  float time_step = 5e-4f;
  float softening = 0.05f;                ///< Plummer softening length
  double momentum_tolerance = 1e-4;       ///< |ΔP| relative to Σ m|v|
  double energy_tolerance = 2e-2;         ///< |ΔE| relative to the initial kinetic + |potential| energy
};

/// Fixed-point scale of accumulated forces (2^40): exact, order-independent sums.
constexpr double kForceScale = 1099511627776.0;

using soaheap_app::hash3;
using soaheap_app::uniform_float;


SOAHEAP_HD inline long long to_fixed(float value) { return static_cast<long long>(static_cast<double>(value) * kForceScale); }

class Body : public soaheap::Object<Body> {
 public:
  using FieldTypes = soaheap::fields<float, float, float, float, float, long long, long long>;
  static constexpr const char* kName = "Body";
  soaheap::Field<Body, 0> pos_x;
  soaheap::Field<Body, 1> pos_y;
  soaheap::Field<Body, 2> vel_x;
  soaheap::Field<Body, 3> vel_y;
  soaheap::Field<Body, 4> mass;
  soaheap::Field<Body, 5> force_x;  ///< fixed point, kForceScale
  soaheap::Field<Body, 6> force_y;

  /// Body @p index of a disc of radius 1 in slow rigid rotation, masses in [0.5, 1.5).
  SOAHEAP_HD Body(std::uint64_t index, std::uint64_t seed) {
    const float radius = sqrtf(uniform_float(seed, 0, index));
    const float angle = 6.2831853f * uniform_float(seed, 1, index);
    pos_x = radius * cosf(angle);
    pos_y = radius * sinf(angle);
    const float spin = 0.3f;
    vel_x = -spin * radius * sinf(angle) + 0.05f * (uniform_float(seed, 2, index) - 0.5f);
    vel_y = spin * radius * cosf(angle) + 0.05f * (uniform_float(seed, 3, index) - 0.5f);
    mass = 0.5f + uniform_float(seed, 4, index);
    force_x = 0;
    force_y = 0;
  }

  /// What the inner loop needs of the body whose force it sums, and that sum: copied into a local
  /// struct once per body (as collision does), so after inlining it lives in registers and the
  /// inner loop only reads the visited body's fields; with nothing stored per pair, the loads of
  /// consecutive visited bodies can overlap (device_do unrolls full blocks).
  struct Target {
    float x, y, mass;
    const Body* body;
    long long force_x, force_y;
  };

  /// Adds the gravitational force this body exerts on @p target to target's sum. The expression is
  /// symmetric in the two bodies, so F(a on b) == -F(b on a) bit for bit.
  SOAHEAP_HD void apply_force_to(Target* target, float gravity, float softening) const {
    if (target->body == this) return;
    const float dx = static_cast<float>(pos_x) - target->x;
    const float dy = static_cast<float>(pos_y) - target->y;
    const float distance_squared = dx * dx + dy * dy + softening * softening;
    const float inverse = 1.0f / (distance_squared * sqrtf(distance_squared));
    const float magnitude = gravity * (static_cast<float>(mass) * target->mass) * inverse;
    target->force_x += to_fixed(magnitude * dx);
    target->force_y += to_fixed(magnitude * dy);
  }

  template <class View>
  SOAHEAP_HD void compute_force(const View& heap, float gravity, float softening) {
    Target target{pos_x, pos_y, mass, this, 0, 0};
    soaheap::device_do<Body>(heap, &Body::apply_force_to, &target, gravity, softening);
    force_x = target.force_x;
    force_y = target.force_y;
  }

  SOAHEAP_HD void update(float time_step) {
    const float inverse_mass = 1.0f / static_cast<float>(mass);
    vel_x += static_cast<float>(static_cast<double>(static_cast<long long>(force_x)) / kForceScale) * inverse_mass * time_step;
    vel_y += static_cast<float>(static_cast<double>(static_cast<long long>(force_y)) / kForceScale) * inverse_mass * time_step;
    pos_x += static_cast<float>(vel_x) * time_step;
    pos_y += static_cast<float>(vel_y) * time_step;
  }
};

using NbodyHeap = soaheap::Heap<Body>;
using View = NbodyHeap::View;

struct Totals {
  double momentum_x = 0, momentum_y = 0, momentum_scale = 0;
  double kinetic = 0, potential = 0;
  std::uint64_t bodies = 0;
};

/// Momentum and energy of the current state, in double precision on the host.
inline Totals measure(const NbodyHeap& heap, float gravity, float softening) {
  std::vector<double> x, y, m;
  Totals totals;
  heap.for_each<Body>([&](const Body* body) {
    const double mass = body->mass, vx = body->vel_x, vy = body->vel_y;
    totals.momentum_x += mass * vx;
    totals.momentum_y += mass * vy;
    totals.momentum_scale += mass * std::sqrt(vx * vx + vy * vy);
    totals.kinetic += 0.5 * mass * (vx * vx + vy * vy);
    x.push_back(body->pos_x);
    y.push_back(body->pos_y);
    m.push_back(mass);
  });
  totals.bodies = x.size();
  const double eps2 = static_cast<double>(softening) * softening;
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::size_t j = i + 1; j < x.size(); ++j) {
      const double dx = x[i] - x[j], dy = y[i] - y[j];
      totals.potential -= gravity * m[i] * m[j] / std::sqrt(dx * dx + dy * dy + eps2);
    }
  return totals;
}

}  // namespace nbody

namespace {

int run_app(int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli("N-body: all-pairs gravity between Body objects (device_do inside parallel_do); --size is the number of bodies", soaheap_app::AppDefaults{800, 16384, 40, 200});
  nbody::Parameters parameters;
  cli.option("--time-step", parameters.time_step, "integration time step");
  cli.option("--softening", parameters.softening, "Plummer softening length");
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions options = cli.options();

  const std::uint64_t bodies = options.size;
  // G scales with 1/n so that accelerations stay O(1) at every problem size.
  const float gravity = 1.0f / static_cast<float>(bodies);
  soaheap::HeapOptions heap_options;
  heap_options.objects = bodies + bodies / 4 + 64 * 8;
  heap_options.backend = options.backend;
  nbody::NbodyHeap heap(soaheap_app::heap_options_for(heap_options, options));
  soaheap_app::AppRun<nbody::NbodyHeap> run("nbody", options, heap);
  heap.parallel_new<nbody::Body>(bodies, options.seed);
  const nbody::Totals before = nbody::measure(heap, gravity, parameters.softening);

  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    heap.parallel_do<nbody::Body, &nbody::Body::compute_force<nbody::View>>(heap.view(), gravity, parameters.softening);
    heap.parallel_do<nbody::Body, &nbody::Body::update>(parameters.time_step);
    run.after_iteration(iteration);
  }
  run.stop_clock();

  const nbody::Totals after = nbody::measure(heap, gravity, parameters.softening);
  const double momentum_error = std::hypot(after.momentum_x - before.momentum_x, after.momentum_y - before.momentum_y) /
                                std::max(before.momentum_scale, 1e-30);
  const double energy_before = before.kinetic + before.potential;
  const double energy_after = after.kinetic + after.potential;
  const double energy_drift =
      std::fabs(energy_after - energy_before) / std::max(before.kinetic + std::fabs(before.potential), 1e-30);
  const bool passed = after.bodies == bodies && std::isfinite(energy_after) &&
                      momentum_error <= parameters.momentum_tolerance && energy_drift <= parameters.energy_tolerance;
  heap.validate(soaheap::Validation::structure);
  soaheap_app::Result extra;
  extra["bodies"] = bodies;
  extra["momentum_error"] = momentum_error;
  extra["energy_drift"] = energy_drift;
  extra["energy"] = energy_after;
  return run.finish(passed, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("nbody", [&] { return run_app(argc, argv); });
}
