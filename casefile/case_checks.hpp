// The checks of `validate_case`, one per part of a case, so that the JSON
// reader can run each as soon as it has read that part (later parts are
// shaped by earlier ones: batches by mesh.dp and accumulation.steps).
// Every check throws InputError with a one-line message that starts with the
// JSON path of the offending key, e.g. "mesh.dp: ...".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "casefile/case.hpp"

namespace infonce::case_checks {

[[noreturn]] void fail(std::string_view path, std::string_view problem);

// "batches" + index(2) -> "batches[2]".
std::string index_path(std::string_view path, std::int64_t index);

void check_mesh(const Mesh& mesh);
void check_loss_settings(const loss::LossSettings& settings);
void check_weight(const Matrix<double>& weight);
void check_accumulation_steps(std::int32_t steps);
// Needs accumulation.steps already checked.
void check_accumulation_window(const Case& c);

// Needs mesh, loss settings, weight and accumulation steps already checked.
void check_batches(const Case& c);
void check_padding_draws(const Case& c);
void check_expect(const Case& c);
// expect.direct names every direct parameter of the case, with finite values.
void check_expect_direct(const Case& c);
// The CLIP family's shapes, numbers and keys (casefile/clip_case.hpp).
void check_clip(const Case& c);
void check_ntxent(const Case& c);
void check_strategy(const Case& c);

}  // namespace infonce::case_checks
