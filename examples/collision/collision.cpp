// n-body simulation with collisions (DynaSOAr paper, Fig. 1 and §6; CompactGpu paper): bodies
// attract each other, and a body that comes close to a heavier one merges into it and destroys
// itself, so the heap fragments as the run goes on. Prints one JSON result line; the self-check is
// conservation of the total mass.

#include "collision/physics.cuh"
#include "common/app.cuh"

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
  // The inner loops of steps 1, 3 and 4 visit every body with device_do. What they need of the
  // outer body is copied into a local struct once, and results accumulate there: after inlining it
  // lives in registers, so the inner loop only reads the visited body's fields.

  /// The outer body of step 1 and the pull summed on it.
  struct Pull {
    float x, y;
    std::uint64_t id;
    long long acceleration_x, acceleration_y;
  };
  SOAHEAP_HD void add_pull_on(Pull* pull) const {
    if (static_cast<std::uint64_t>(id) == pull->id) return;
    add_acceleration(pull->x, pull->y, pos_x, pos_y, mass, pull->acceleration_x, pull->acceleration_y);
  }
  SOAHEAP_HD void compute_force(const View& heap) {
    Pull pull{pos_x, pos_y, id, 0, 0};
    soaheap::device_do<Body>(heap, &Body::add_pull_on, &pull);
    acceleration_x = pull.acceleration_x;
    acceleration_y = pull.acceleration_y;
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
  struct Nearest {
    float distance_squared;
    std::uint64_t id;
    Body* body;
  };
  /// The outer body of steps 3 and 4 and the nearest match found so far.
  struct Search {
    float x, y, mass;
    std::uint64_t id;
    float radius_squared;
    Nearest best;
  };
  SOAHEAP_HD void find_merge_target(const View& heap, float radius) {
    Search search{pos_x, pos_y, mass, id, radius * radius, {radius * radius * 2.0f + 1.0f, kNoBody, nullptr}};
    soaheap::device_do<Body>(heap, &Body::consider_as_target_of, &search);
    merge_target = search.best.body;
    merge_target_id = search.best.id;
  }
  /// Called on every candidate (`this`) for the searching body: a candidate within the radius that
  /// absorbs the searcher, nearest first.
  SOAHEAP_HD void consider_as_target_of(Search* search) {
    const std::uint64_t candidate_id = id;
    if (candidate_id == search->id) return;
    if (!absorbs(mass, candidate_id, search->mass, search->id)) return;
    const float dx = static_cast<float>(pos_x) - search->x;
    const float dy = static_cast<float>(pos_y) - search->y;
    const float distance_squared = dx * dx + dy * dy;
    if (distance_squared > search->radius_squared) return;
    if (closer(distance_squared, candidate_id, search->best.distance_squared, search->best.id))
      search->best = {distance_squared, candidate_id, this};
  }

  // ---- step 4: a body without a target accepts the nearest body that targets it ----
  SOAHEAP_HD void consider_incoming(Search* sink) {
    if (static_cast<std::uint64_t>(merge_target_id) != sink->id) return;
    const float dx = static_cast<float>(pos_x) - sink->x;
    const float dy = static_cast<float>(pos_y) - sink->y;
    const float distance_squared = dx * dx + dy * dy;
    if (closer(distance_squared, id, sink->best.distance_squared, sink->best.id))
      sink->best = {distance_squared, id, this};
  }
  SOAHEAP_HD void accept_merge(const View& heap) {
    accepted_id = std::uint64_t{kNoBody};
    if (static_cast<std::uint64_t>(merge_target_id) != kNoBody) return;
    Search sink{pos_x, pos_y, mass, id, 0.0f, {INFINITY, kNoBody, nullptr}};
    soaheap::device_do<Body>(heap, &Body::consider_incoming, &sink);
    const Nearest best = sink.best;
    if (best.body == nullptr) return;
    float new_mass = mass, x = pos_x, y = pos_y, vx = vel_x, vy = vel_y;
    Body* other = best.body;
    merge_into(new_mass, x, y, vx, vy, other->mass, other->pos_x, other->pos_y, other->vel_x, other->vel_y);
    mass = new_mass;
    pos_x = x;
    pos_y = y;
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
  BodyHeap heap(heap_options);
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
