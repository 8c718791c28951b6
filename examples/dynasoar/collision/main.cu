// DynaSOAr's collision model written with soaheap's native API: the rules, constants, random draws
// and kernel sequence of the collision program in DynaSOAr's example folder
// (example/collision/dynasoar), method for method, so that the same program built through
// the DynaSOAr shim (compat/shim) can be compared with it at equal parameters — the comparison of
// issue 20, tools/gpu/dynasoar-examples.sh compare. examples/collision is soaheap's own collision
// program (deterministic merges, forces summed in registers with device_do_fields); this one keeps
// DynaSOAr's access pattern (each visited body adds its pull into the outer body's force fields) to
// measure what the shim costs.
//
// The model: bodies with random positions in [-1, 1]², all-pairs gravity, and merging: a body
// closer than kMergeThreshold to a heavier one marks itself for a merge into it (several may pick
// the same target; DynaSOAr accepts the race), then merges if its target is not merging itself,
// and is destroyed.
//
// Self-check: between 1 and --size bodies remain, each with finite position and velocity and a
// positive mass; the heap validates. `checksum` is DynaSOAr's.

#include "examples/common/app.cuh"
#include "examples/common/curand_state.cuh"
#include "examples/common/dynasoar_port.cuh"

#include <soaheap/soaheap.cuh>

#include <cmath>
#include <cstdint>
#include <string>

namespace dynasoar_collision {

// DynaSOAr's example/collision/configuration.h.
constexpr float kMergeThreshold = 0.005f;
constexpr float kMaxMass = 75;
constexpr int kSeed = 42;
constexpr float kTimeInterval = 0.05f;
constexpr float kDampeningFactor = 0.05f;
constexpr float kGravityConstant = 6.673e-11f;

class Body : public soaheap::Object<Body> {
 public:
  using FieldTypes = soaheap::fields<Body*, float, float, float, float, float, float, float, bool, bool>;
  static constexpr const char* kName = "Body";
  soaheap::Field<Body, 0> merge_target;
  soaheap::Field<Body, 1> pos_x;
  soaheap::Field<Body, 2> pos_y;
  soaheap::Field<Body, 3> vel_x;
  soaheap::Field<Body, 4> vel_y;
  soaheap::Field<Body, 5> force_x;
  soaheap::Field<Body, 6> force_y;
  soaheap::Field<Body, 7> mass;
  soaheap::Field<Body, 8> has_incoming_merge;
  soaheap::Field<Body, 9> successful_merge;

  SOAHEAP_HD Body(float new_pos_x, float new_pos_y, float new_vel_x, float new_vel_y, float new_mass) {
    merge_target = nullptr;
    pos_x = new_pos_x;
    pos_y = new_pos_y;
    vel_x = new_vel_x;
    vel_y = new_vel_y;
    force_x = 0.0f;
    force_y = 0.0f;
    mass = new_mass;
    has_incoming_merge = false;
    successful_merge = false;
  }

  template <class View>
  SOAHEAP_HD void compute_force(const View& heap) {
    force_x = 0.0f;
    force_y = 0.0f;
    soaheap::device_do<Body>(heap, &Body::apply_force, this);
  }

  /// Adds the pull of this body to @p other's force.
  SOAHEAP_HD void apply_force(Body* other) {
    if (other == this) return;
    const float dx = pos_x - other->pos_x;
    const float dy = pos_y - other->pos_y;
    const float dist = sqrtf(dx * dx + dy * dy);
    const float f = kGravityConstant * mass * other->mass / (dist * dist + kDampeningFactor);
    other->force_x += f * dx / dist;
    other->force_y += f * dy / dist;
  }

  SOAHEAP_HD void update() {
    vel_x += force_x * kTimeInterval / mass;
    vel_y += force_y * kTimeInterval / mass;
    pos_x += vel_x * kTimeInterval;
    pos_y += vel_y * kTimeInterval;
    if (pos_x < -1 || pos_x > 1) vel_x = -vel_x;
    if (pos_y < -1 || pos_y > 1) vel_y = -vel_y;
  }

  /// @p other (the outer body) merges into this one when this one is heavier and close.
  SOAHEAP_HD void check_merge_into_this(Body* other) {
    if (!other->has_incoming_merge && mass > other->mass) {
      const float dx = pos_x - other->pos_x;
      const float dy = pos_y - other->pos_y;
      if (dx * dx + dy * dy < kMergeThreshold * kMergeThreshold) {
        // Several bodies may pick the same one; the last write wins (DynaSOAr's rule).
        merge_target = other;
        other->has_incoming_merge = true;
      }
    }
  }

  SOAHEAP_HD void initialize_merge() {
    merge_target = nullptr;
    has_incoming_merge = false;
    successful_merge = false;
  }

  template <class View>
  SOAHEAP_HD void prepare_merge(const View& heap) {
    soaheap::device_do<Body>(heap, &Body::check_merge_into_this, this);
  }

  SOAHEAP_HD void update_merge() {
    Body* m = merge_target;
    if (m == nullptr || static_cast<Body*>(m->merge_target) != nullptr) return;
    const float new_mass = mass + m->mass;
    const float new_vel_x = (vel_x * mass + m->vel_x * m->mass) / new_mass;
    const float new_vel_y = (vel_y * mass + m->vel_y * m->mass) / new_mass;
    m->mass = new_mass;
    m->vel_x = new_vel_x;
    m->vel_y = new_vel_y;
    m->pos_x = (pos_x + m->pos_x) / 2;
    m->pos_y = (pos_y + m->pos_y) / 2;
    successful_merge = true;
  }

  template <class View>
  SOAHEAP_HD void delete_merged(const View& heap) {
    if (successful_merge) soaheap::destroy(heap, this);
  }
};

using CollisionHeap = soaheap::Heap<Body>;
using View = CollisionHeap::View;

/// Creates every body in one thread from one cuRAND sequence (seed kSeed), as their
/// kernel_initialize_bodies<<<1, 1>>> does: bodies end up in the heap in creation order.
struct CreateBodies {
  View heap;
  std::uint64_t count;
  SOAHEAP_HD void operator()(std::uint64_t) const {
    curandState_t state;
    soaheap_app::random_init(kSeed, 0, &state);
    for (std::uint64_t i = 0; i < count; ++i) {
      const float x = 2 * soaheap_app::random_uniform(&state) - 1;
      const float y = 2 * soaheap_app::random_uniform(&state) - 1;
      const float vx = static_cast<float>((soaheap_app::random_uniform(&state) - 0.5) / 1000);
      const float vy = static_cast<float>((soaheap_app::random_uniform(&state) - 0.5) / 1000);
      const float m = static_cast<float>((soaheap_app::random_uniform(&state) / 2 + 0.5) * kMaxMass);
      if (new (heap) Body(x, y, vx, vy, m) == nullptr) return;  // out of memory: reported by the heap
    }
  }
};

}  // namespace dynasoar_collision

namespace {

using dynasoar_collision::Body;
using dynasoar_collision::View;

int run_app(int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli(
      "DynaSOAr's collision (example/collision/dynasoar: its rules, constants and random numbers) written with "
      "soaheap's native API, to compare with that program through the DynaSOAr shim; --size is "
      "the number of bodies",
      soaheap_app::AppDefaults{400, 40000, 20, 2000});
  std::uint64_t heap_objects = soaheap_app::kDynasoarObjects;
  soaheap_app::add_heap_objects_option(cli, heap_objects);
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions options = cli.options();

  soaheap::HeapOptions heap_options;
  heap_options.objects = heap_objects;
  heap_options.backend = options.backend;
  dynasoar_collision::CollisionHeap heap(heap_options);
  soaheap_app::AppRun<dynasoar_collision::CollisionHeap> run("dynasoar_collision", options, heap);
  heap.launch(1, dynasoar_collision::CreateBodies{heap.view(), options.size});

  const soaheap_app::IterationClock clock(heap);
  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    heap.parallel_do<Body, &Body::compute_force<View>>(heap.view());
    heap.parallel_do<Body, &Body::update>();
    heap.parallel_do<Body, &Body::initialize_merge>();
    heap.parallel_do<Body, &Body::prepare_merge<View>>(heap.view());
    heap.parallel_do<Body, &Body::update_merge>();
    heap.parallel_do<Body, &Body::delete_merged<View>>(heap.view());
    run.after_iteration(iteration);
  }
  const double iterations_seconds = clock.seconds();
  run.stop_clock();

  std::uint64_t bodies = 0;
  std::uint64_t broken = 0;
  long long checksum = 0;
  heap.for_each<Body>([&](const Body* body) {
    ++bodies;
    const float x = body->pos_x, y = body->pos_y, vx = body->vel_x, vy = body->vel_y, m = body->mass;
    if (!std::isfinite(x) || !std::isfinite(y) || !std::isfinite(vx) || !std::isfinite(vy) || !(m > 0)) ++broken;
    checksum += static_cast<int>(x * 1000 + y * 2000 + vx * 3000 + vy * 4000) % 123456;
  });
  heap.validate(soaheap::Validation::structure);
  const bool passed = bodies >= 1 && bodies <= options.size && broken == 0;
  soaheap_app::Result extra;
  extra["iterations_time_s"] = iterations_seconds;
  extra["initial_bodies"] = options.size;
  extra["bodies"] = bodies;
  extra["broken_bodies"] = broken;
  extra["checksum"] = checksum;
  return run.finish(passed, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("dynasoar_collision", [&] { return run_app(argc, argv); });
}
