#pragma once
/// @file model.cuh
/// @brief What an application and its baseline share about the model they simulate (a World, a
///        Network: the parameters of the rules): its command line (its own options, --size and
///        --seed), the smaller side-run the self-check simulates when a run is too large for the
///        sequential reference, and the reference's run itself.

#include "examples/common/cli.cuh"
#include "examples/harness/harness.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace soaheap_app {

/// @brief @p model with its size (member @p Size: what --size counts) and seed from @p options.
template <auto Size, class Model>
Model sized_model(Model model, const AppOptions& options) {
  model.*Size = static_cast<std::remove_reference_t<decltype(model.*Size)>>(options.size);
  model.seed = options.seed;
  return model;
}

/// @brief The model the self-check simulates instead of @p model: nothing when @p model's size
///        (member @p Size) is at most @p largest_checked, so that the reference checks the run
///        itself; else @p model at size @p side_size, with the same rules and seed.
template <auto Size, class Model, class SizeType>
std::optional<Model> side_run(const Model& model, SizeType largest_checked, SizeType side_size) {
  if (model.*Size <= largest_checked) return std::nullopt;
  Model side = model;
  side.*Size = side_size;
  return side;
}

/// @brief Parses the command line of a program (described by @p description, sized by @p defaults)
///        whose model has options of its own (`add_options(cli, model)`, found next to Model) into
///        @p options and @p model, the latter made by `model_of(model with the options' values, options)`.
/// @return the exit code when the program should stop now (after --help or an error), else nothing
template <class Model, class ModelOf>
std::optional<int> parse_with_model(int argc, char** argv, const std::string& description, AppDefaults defaults,
                                    ModelOf&& model_of, AppOptions& options, Model& model) {
  Cli cli = application_cli(description, defaults);
  add_options(cli, model);
  if (const auto exit_code = cli.parse(argc, argv)) return exit_code;
  options = cli.options();
  model = model_of(model, options);
  return std::nullopt;
}

/// @brief The sequential reference made of @p arguments after @p iterations steps (0, 1, ...).
template <class Reference, class... Arguments>
Reference reference_after(int iterations, Arguments&&... arguments) {
  Reference reference(std::forward<Arguments>(arguments)...);
  for (int it = 0; it < iterations; ++it) reference.step(static_cast<std::uint64_t>(it));
  return reference;
}

}  // namespace soaheap_app
