// mpirun -np W mpi_agreement DIR [--native-allreduce]: runs every case file in
// DIR whose mesh.world is W on the MPI backend (one process per world rank,
// all cases in one job) and, on world rank 0, the same case on the fiber
// simulator in the same process, and compares the two results.
//
// Default (ordered reduction): every loss, gradient entry and
// padded_positives must be bit-identical; exit 1 otherwise. With
// --native-allreduce (MPI_Allreduce, order unspecified) results need only
// agree within the SPEC tolerance: evaluate() must give the same verdicts on
// both backends; the worst difference is reported.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "casefile/case_json.hpp"
#include "sim/mpi/mpi_communicator.hpp"
#include "sim/mpi/mpi_runtime.hpp"
#include "step/mpi/run_on_mpi.hpp"
#include "step/run_case.hpp"
#include "tests/mpi/job_exit_code.hpp"

namespace {

using infonce::step::CaseReport;
using infonce::step::DistributedResult;

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

struct Comparison {
  bool identical = true;
  double worst = 0;  // max |mpi - fiber| over losses and gradient entries
};

Comparison compare(const DistributedResult& mpi, const DistributedResult& fiber) {
  Comparison out;
  const auto add = [&out](double a, double b) {
    if (same_bits(a, b)) return;
    out.identical = false;
    const double diff = std::abs(a - b);
    out.worst = std::isnan(diff) ? diff : std::max(out.worst, diff);
  };
  out.identical = mpi.padded_positives == fiber.padded_positives &&
                  mpi.losses.size() == fiber.losses.size() &&
                  mpi.grads.size() == fiber.grads.size();
  if (!out.identical) {
    out.worst = INFINITY;
    return out;
  }
  for (std::size_t w = 0; w < mpi.losses.size(); ++w) {
    add(mpi.losses[w], fiber.losses[w]);
    if (mpi.grads[w].size() != fiber.grads[w].size()) {
      out.identical = false;
      out.worst = INFINITY;
      return out;
    }
    for (std::size_t i = 0; i < mpi.grads[w].size(); ++i) add(mpi.grads[w][i], fiber.grads[w][i]);
  }
  return out;
}

bool same_verdicts(const CaseReport& a, const CaseReport& b) {
  return a.pass == b.pass && a.losses_equal == b.losses_equal &&
         a.grads_consistent == b.grads_consistent && a.loss_matches == b.loss_matches &&
         a.grad_matches == b.grad_matches;
}

std::vector<std::filesystem::path> case_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::ranges::sort(files);  // directory order is unspecified
  return files;
}

int run(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args.size() > 2 || (args.size() == 2 && args[1] != "--native-allreduce")) {
    throw infonce::InputError("usage: mpi_agreement DIR [--native-allreduce]");
  }
  const bool native = args.size() == 2;
  infonce::sim::MpiOptions options;
  options.reduction =
      native ? infonce::sim::MpiReduction::native : infonce::sim::MpiReduction::ordered;
  options.stall_timeout_seconds = 60;
  infonce::sim::MpiCommunicator comm(options);
  const bool reporter = comm.world_rank() == 0;

  std::int64_t cases = 0, identical = 0, verdicts_agree = 0, passed = 0;
  // A SigLIP case moves its rows by each of open_clip's transports in turn.
  constexpr std::array<infonce::step::SigLipTransport, 4> transports{
      infonce::step::SigLipTransport::bidir, infonce::step::SigLipTransport::shift,
      infonce::step::SigLipTransport::reduce, infonce::step::SigLipTransport::gather};
  double worst = 0;
  std::string worst_case;
  double worst_float64 = 0;  // the same, over float64 cases only
  for (const auto& path : case_files(args[0])) {
    const infonce::Case c = infonce::read_case_file(path);
    if (c.mesh.world != comm.world_size()) continue;
    infonce::step::StepVariant variant;
    variant.siglip_transport = transports[static_cast<std::size_t>(cases) % transports.size()];
    ++cases;
    const DistributedResult mpi = infonce::step::run_on_mpi(c, variant, comm);
    if (!reporter) continue;
    const DistributedResult fiber = infonce::step::run_on_fibers(c, variant, {});
    const Comparison diff = compare(mpi, fiber);
    if (diff.identical) ++identical;
    if (c.scalar == infonce::ScalarType::float64 && !(diff.worst <= worst_float64)) {
      worst_float64 = diff.worst;
    }
    if (!diff.identical && !(diff.worst <= worst)) {
      worst = diff.worst;
      worst_case = path.filename().string();
    }
    const infonce::step::ReferenceValues reference = infonce::step::compute_case_reference(c);
    const CaseReport on_mpi = infonce::step::evaluate(c, mpi, reference);
    const CaseReport on_fibers = infonce::step::evaluate(c, fiber, reference);
    if (same_verdicts(on_mpi, on_fibers)) ++verdicts_agree;
    if (on_mpi.pass) ++passed;
    if (!diff.identical && !native) {
      std::cout << "DIFFERS: " << path.filename().string() << " max |mpi - fiber| = " << diff.worst
                << "\n";
    }
  }
  if (!reporter) return 0;
  std::cout << "world " << comm.world_size() << (native ? ", MPI_Allreduce" : ", ordered reduction")
            << ": " << cases << " cases, " << identical << " bit-identical to the fiber backend, "
            << "worst |mpi - fiber| = " << worst
            << (worst_case.empty() ? "" : " (" + worst_case + ")")
            << " (float64 cases: " << worst_float64 << "), same verdicts " << verdicts_agree << "/"
            << cases << ", pass " << passed << "/" << cases << "\n";
  const bool ok = cases > 0 && verdicts_agree == cases && (native || identical == cases);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  infonce::sim::ensure_mpi_initialized();
  int code = infonce::sim::run_or_abort_job([&] { return run(argc, argv); }, "mpi_agreement",
                                            infonce::mpi_test::job_exit_code);
  // Every rank exits with world rank 0's verdict.
  infonce::sim::MpiCommunicator comm;
  double shared = code;
  comm.broadcast(comm.world(), std::span(&shared, 1), 0);
  return static_cast<int>(shared);
}
