// A program built against an installed soaheap: allocates, runs a method, checks the result, and
// reads a TOML defragmentation configuration through the installed soaheap::config library.
#include <soaheap/soaheap.cuh>

#include <cstdio>

class Particle : public soaheap::Object<Particle> {
 public:
  using FieldTypes = soaheap::fields<float, float>;
  static constexpr const char* kName = "Particle";
  soaheap::Field<Particle, 0> position;
  soaheap::Field<Particle, 1> velocity;

  Particle(std::uint64_t index, float speed) {
    position = static_cast<float>(index);
    velocity = speed;
  }
  void move() { position += velocity; }
};

int main() {
  soaheap::HeapOptions options;
  options.objects = 1000;
  soaheap::Heap<Particle> heap(options);
  heap.parallel_new<Particle>(100, 0.5f);
  heap.parallel_do<Particle, &Particle::move>();
  double sum = 0;
  heap.for_each<Particle>([&](const Particle* p) { sum += p->position; });
  heap.validate();
  const soaheap::DefragConfig config =
      soaheap::parse_defrag_config_toml("[defrag]\npolicy = \"every\"\nevery = 7\n", {{"Particle", 64}});
  std::printf("sum %.1f, defrag every %lld\n", sum, config.every);
  return sum == 4950.0 + 50.0 && config.every == 7 ? 0 : 1;
}
