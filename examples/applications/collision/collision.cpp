// n-body simulation with collisions (DynaSOAr paper, Fig. 1 and §6; CompactGpu paper): bodies
// attract each other, and a body that comes close to a heavier one merges into it and destroys
// itself, so the heap fragments as the run goes on. Prints one JSON result line; the self-check is
// conservation of the total mass.

#include "examples/applications/collision/physics.cuh"
#include "examples/common/app.cuh"

#include <cmath>
#include <cstdint>

namespace collision {

class Body;
using BodyHeap = soaheap::Heap<Body>;
using View = soaheap::HeapView<Body>;

class Body : public soaheap::Object<Body> {
 public:
  using FieldTypes = soaheap::fields<std::uint64_t, float, float, float, float, long long, long long, float, Body*,
                                     std::uint64_t, std::uint64_t>;
  static constexpr const char* kName = "Body";
  soaheap::Field<Body, 0> id;
  soaheap::Field<Body, 1> pos_x;
  soaheap::Field<Body, 2> pos_y;
  soaheap::Field<Body, 3> vel_x;
  soaheap::Field<Body, 4> vel_y;
  soaheap::Field<Body, 5> acceleration_x;  ///< fixed point, see kAccelerationScale
  soaheap::Field<Body, 6> acceleration_y;
  soaheap::Field<Body, 7> mass;
  soaheap::Field<Body, 8> merge_target;     ///< the body this one merges into in this step, or null
  soaheap::Field<Body, 9> merge_target_id;  ///< its id, or kNoBody
  soaheap::Field<Body, 10> accepted_id;     ///< the body this one absorbs in this step, or kNoBody

  SOAHEAP_HD Body(std::uint64_t index, std::uint64_t seed, std::uint64_t count) {
    const InitialBody initial = initial_body(seed, index, count);
    id = index;
    pos_x = initial.x;
    pos_y = initial.y;
    vel_x = initial.vx;
    vel_y = initial.vy;
    acceleration_x = 0;
    acceleration_y = 0;
    mass = initial.mass;
    merge_target = nullptr;
    merge_target_id = kNoBody;
    accepted_id = kNoBody;
  }

  // ---- step 1: forces (device_do over all bodies) ----
  // The inner loops of steps 1, 3 and 4 visit every body with device_do_fields: the visited body's
  // fields arrive as values read from its block's SOA arrays (no pointer decode per field), and
  // what the loop needs of the outer body lives in locals, so after inlining the inner loop is a
  // loop over arrays as in the hand-written baseline.
  SOAHEAP_HD void compute_force(const View& heap) {
    const float x = pos_x, y = pos_y;
    long long ax = 0, ay = 0;
    // Itself is recognised by its pointer (made from block and slot, no load), as the baseline
    // compares indices.
    soaheap::device_do_fields<Body, &Body::pos_x, &Body::pos_y, &Body::mass>(
        heap, [&](Body* other, float other_x, float other_y, float other_mass) {
          if (other != this) add_acceleration(x, y, other_x, other_y, other_mass, ax, ay);
        });
    acceleration_x = ax;
    acceleration_y = ay;
  }

  // ---- step 2: integration ----
  SOAHEAP_HD void update() {
    float x = pos_x, y = pos_y, vx = vel_x, vy = vel_y;
    integrate(acceleration_x, acceleration_y, x, y, vx, vy);
    pos_x = x;
    pos_y = y;
    vel_x = vx;
    vel_y = vy;
  }

  // ---- step 3: merge candidates ----
  /// The nearest match found so far.
  struct Nearest {
    float distance_squared;
    std::uint64_t id;
    Body* body;
  };
  /// Each candidate within the radius that absorbs this body, nearest first.
  SOAHEAP_HD void find_merge_target(const View& heap, float radius) {
    const float x = pos_x, y = pos_y, own_mass = mass, radius_squared = radius * radius;
    const std::uint64_t self = id;
    Nearest best{radius_squared * 2.0f + 1.0f, kNoBody, nullptr};
    soaheap::device_do_fields<Body, &Body::id, &Body::mass, &Body::pos_x, &Body::pos_y>(
        heap, [&](Body* candidate, std::uint64_t candidate_id, float candidate_mass, float cx, float cy) {
          if (candidate_id == self || !absorbs(candidate_mass, candidate_id, own_mass, self)) return;
          const float dx = cx - x, dy = cy - y;
          const float distance_squared = dx * dx + dy * dy;
          if (distance_squared > radius_squared) return;
          if (closer(distance_squared, candidate_id, best.distance_squared, best.id))
            best = {distance_squared, candidate_id, candidate};
        });
    merge_target = best.body;
    merge_target_id = best.id;
  }

  // ---- step 4: a body without a target accepts the nearest body that targets it ----
  SOAHEAP_HD void accept_merge(const View& heap) {
    accepted_id = std::uint64_t{kNoBody};
    if (static_cast<std::uint64_t>(merge_target_id) != kNoBody) return;
    const float x = pos_x, y = pos_y;
    const std::uint64_t self = id;
    Nearest best{INFINITY, kNoBody, nullptr};
    // Few bodies target this one: the loop reads only the target ids, the rest through the pointer.
    soaheap::device_do_fields<Body, &Body::merge_target_id>(heap, [&](Body* incoming, std::uint64_t its_target) {
      if (its_target != self) return;
      const std::uint64_t incoming_id = incoming->id;
      const float dx = static_cast<float>(incoming->pos_x) - x, dy = static_cast<float>(incoming->pos_y) - y;
      const float distance_squared = dx * dx + dy * dy;
      if (closer(distance_squared, incoming_id, best.distance_squared, best.id))
        best = {distance_squared, incoming_id, incoming};
    });
    if (best.body == nullptr) return;
    float new_mass = mass, nx = pos_x, ny = pos_y, vx = vel_x, vy = vel_y;
    Body* other = best.body;
    merge_into(new_mass, nx, ny, vx, vy, other->mass, other->pos_x, other->pos_y, other->vel_x, other->vel_y);
    mass = new_mass;
    pos_x = nx;
    pos_y = ny;
    vel_x = vx;
    vel_y = vy;
    accepted_id = best.id;
  }

  // ---- step 5: absorbed bodies disappear, the others forget their target ----
  SOAHEAP_HD void finish_merge(const View& heap) {
    Body* target = merge_target;
    if (target != nullptr && static_cast<std::uint64_t>(target->accepted_id) == static_cast<std::uint64_t>(id)) {
      soaheap::destroy(heap, this);
      return;
    }
    merge_target = nullptr;
    merge_target_id = std::uint64_t{kNoBody};
  }
};

double total_mass(const BodyHeap& heap) {
  double total = 0;
  heap.for_each<Body>([&](const Body* body) { total += static_cast<float>(body->mass); });
  return total;
}

int run(int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli(
      "n-body simulation with collisions on a soaheap heap (one JSON result line on stdout)",
      {/*host_size*/ 1024, /*cuda_size*/ 65536, /*host_iterations*/ 50, /*cuda_iterations*/ 100});
  long long defrag_every = 0;
  cli.option("--defrag-every", defrag_every, "Defragment every M iterations (shorthand for --defrag-policy every:M)", 1,
             1LL << 40);
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  soaheap_app::AppOptions options = cli.options();
  if (defrag_every > 0) {
    if (!options.defrag_policy.empty())
      throw soaheap::invalid_argument("give either --defrag-every or --defrag-policy, not both");
    options.defrag_policy = "every:" + std::to_string(defrag_every);
  }

  soaheap::HeapOptions heap_options;
  heap_options.objects = options.size;
  heap_options.backend = options.backend;
  BodyHeap heap(soaheap_app::heap_options_for(heap_options, options));
  soaheap_app::AppRun<BodyHeap> app("collision", options, heap);

  heap.parallel_new<Body>(options.size, options.seed, options.size);
  const double mass_before = total_mass(heap);
  const float radius = collision_radius(options.size);
  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    heap.parallel_do<Body, &Body::compute_force>(heap.view());
    heap.parallel_do<Body, &Body::update>();
    heap.parallel_do<Body, &Body::find_merge_target>(heap.view(), radius);
    heap.parallel_do<Body, &Body::accept_merge>(heap.view());
    heap.parallel_do<Body, &Body::finish_merge>(heap.view());
    app.after_iteration(iteration);
  }
  app.stop_clock();
  const double mass_after = total_mass(heap);
  const bool conserved = std::fabs(mass_after - mass_before) <= kMassTolerance * mass_before;
  soaheap_app::Result extra;
  extra["bodies_left"] = heap.count<Body>();
  extra["total_mass_before"] = mass_before;
  extra["total_mass_after"] = mass_after;
  return app.finish(conserved, extra);
}

}  // namespace collision

int main(int argc, char** argv) {
  return soaheap_app::run_main("collision", [&] { return collision::run(argc, argv); });
}
